package gpu

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// FuzzParseDCGM feeds arbitrary --dcgm settings to the DCGM setting parser. ValidateDCGM
// and parseDCGM agree; a refused setting gets a message that quotes it; an accepted one
// is one of the documented forms — off, embedded, a connection string with an address,
// or host:port with a host and a port in 1-65535 — and holds no space or control
// character, which no host name, address or socket path that could be reached has.
func FuzzParseDCGM(f *testing.F) {
	for _, s := range []string{
		DCGMOff, DCGMEmbedded, "localhost:5555", "10.0.0.7:5555", "[::1]:5555", "tcp://10.0.0.7:5555",
		"unix:///run/nvidia/dcgm.sock", "vsock://3:5555", "", "Embedded", "localhost", ":5555", "localhost:0",
		"localhost:65536", "localhost:http", "tcp://", "http://localhost:5555", " localhost:5555", "host\x00:5555",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, setting string) {
		verr := ValidateDCGM(setting)
		if setting == DCGMOff {
			if verr != nil {
				t.Fatalf("ValidateDCGM(%q) = %v", setting, verr)
			}
			return
		}
		tg, err := parseDCGM(setting)
		if (err == nil) != (verr == nil) {
			t.Fatalf("parseDCGM(%q) = %v but ValidateDCGM says %v", setting, err, verr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(setting)) || tg != (dcgmTarget{}) {
				t.Fatalf("parseDCGM(%q) = %+v, %q: want the zero target and a message quoting the setting", setting, tg, err)
			}
			return
		}
		if i := strings.IndexFunc(setting, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
			t.Fatalf("parseDCGM accepted %q, with %q at %d", setting, setting[i:i+1], i)
		}
		if tg.embedded {
			if setting != DCGMEmbedded || tg.addr != "" {
				t.Fatalf("parseDCGM(%q) = %+v", setting, tg)
			}
			return
		}
		if tg.addr != setting {
			t.Fatalf("parseDCGM(%q) dials %q", setting, tg.addr)
		}
		if scheme, rest, ok := strings.Cut(setting, "://"); ok && (scheme == "tcp" || scheme == "unix" || scheme == "vsock") {
			if rest == "" {
				t.Fatalf("parseDCGM(%q): a connection string without an address", setting)
			}
			return
		}
		host, port, err := net.SplitHostPort(setting)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			t.Fatalf("parseDCGM accepted %q: host %q, port %q (%v)", setting, host, port, err)
		}
	})
}
