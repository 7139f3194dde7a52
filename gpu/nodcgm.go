//go:build !cgo || !linux

package gpu

import (
	"fmt"
	"io"
)

// OpenDCGM would open the GPU readings of DCGM, but this build of slogate cannot: DCGM
// is loaded through cgo, and this build has no cgo or is not for Linux. It validates
// setting like the cgo build, then returns an error wrapping ErrDCGMUnavailable.
func OpenDCGM(setting string) (Source, io.Closer, error) {
	if _, err := parseDCGM(setting); err != nil {
		return nil, nil, err
	}
	return nil, nil, fmt.Errorf("%w: slogate was built without cgo (or not for Linux), so it cannot load libdcgm; build it with CGO_ENABLED=1 for GPU metrics", ErrDCGMUnavailable)
}
