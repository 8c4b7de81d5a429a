package devices

import "embed"

// SerialConfigs holds the `adapter: serial` config files of the serial
// instrument packages, by their path in this folder
// ("ika-cmag-hs7/hotplate.yaml"): the templates `mhp init serial` fills in
// for the instrument it identifies (serial.Discover).
//
//go:embed ika-cmag-hs7/hotplate.yaml mettler-balance/balance.yaml ne1000-pump/pump.yaml
var SerialConfigs embed.FS
