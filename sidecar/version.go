package sidecar

import "runtime/debug"

// version is set at link time:
// -ldflags "-X github.com/slogate/slogate/sidecar.version=v1.2.3".
var version = ""

// Version returns the link-time version, else the module version, else the VCS revision
// recorded by the Go toolchain, else "devel". slogate_build_info and `slogate version`
// report it.
func Version() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel-" + s.Value[:12]
		}
	}
	return "devel"
}
