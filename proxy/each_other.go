//go:build !linux

package proxy

import "errors"

// eachSupported is false where slogate does not read the engine's socket itself:
// bodies are read through Read.
const eachSupported = false

func (b *engineBody) each([]byte, *watcher, func([]byte) error) error {
	return errors.New("proxy: reading a body straight from the socket is Linux-only")
}
