package directory

import "os"

// osHostname is the host name advertised by mDNS.
func osHostname() (string, error) {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "mhp-host", err
	}
	return h, nil
}
