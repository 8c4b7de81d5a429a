//go:build !unix

package devicepkg

// openNonblock is 0 where FIFOs cannot be made in a package folder.
const openNonblock = 0
