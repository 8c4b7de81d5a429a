package serial

// FormatValue exposes formatValue to the tests.
var FormatValue = formatValue
