package directory

// MDNSHostName is mdnsHostName, for the external tests.
var MDNSHostName = mdnsHostName
