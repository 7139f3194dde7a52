package proxy

import (
	"crypto/subtle"
	"net/http"

	"github.com/slogate/slogate/admission"
)

// ProbeKeyHeader carries the key that lets a request claim the probe class (see
// Config.ProbeKey). slogate removes it before forwarding.
const ProbeKeyHeader = "X-Slogate-Probe-Key"

// class returns the admission class r asks for, or Interactive when it claims the probe
// class without being trusted to.
func (p *Proxy) class(r *http.Request) admission.Class {
	c := admission.ParseClass(r.Header.Get(admission.PriorityHeader))
	if c != admission.Probe || p.cfg.TrustPriority {
		return c
	}
	key := r.Header.Get(ProbeKeyHeader)
	if p.cfg.ProbeKey != "" && subtle.ConstantTimeCompare([]byte(key), []byte(p.cfg.ProbeKey)) == 1 {
		return c
	}
	return admission.Interactive
}
