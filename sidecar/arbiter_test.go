package sidecar

import (
	"strings"
	"testing"
)

// TestArbiter: one piece of background work holds the engine at a time; live traffic
// holds back both; a calibration, once it holds the engine, no longer counts the
// engine's saturation (it causes it), while a probe always does.
func TestArbiter(t *testing.T) {
	var liveBusy bool
	var asked []bool // the engineState of each question to live
	a := &arbiter{live: func(engineState bool) (bool, string) {
		asked = append(asked, engineState)
		if liveBusy {
			return true, "live traffic"
		}
		return false, ""
	}}
	probe, calib := a.guard("probe", false), a.guard("calibration", true)

	steps := []struct {
		name      string
		do        func() (bool, string)
		live      bool
		busy      bool
		why       string // a substring of the reason; "" when not busy
		askedWith []bool // the engineState live was asked with; nil: not asked
	}{
		{name: "probe claims a free engine", do: probe.Claim, busy: false, askedWith: []bool{true}},
		{name: "calibration cannot claim it", do: calib.Claim, busy: true, why: "a probe is running"},
		{name: "calibration's poll says busy too", do: calib.Busy, busy: true, why: "a probe is running"},
		{name: "probe's poll asks live traffic with the engine's state", do: probe.Busy, busy: false, askedWith: []bool{true}},
		{name: "live traffic stops the probe", do: probe.Busy, live: true, busy: true, why: "live traffic", askedWith: []bool{true}},
		{name: "probe releases; calibration claims", do: func() (bool, string) { probe.Release(); return calib.Claim() }, busy: false, askedWith: []bool{true}},
		{name: "running calibration ignores engine saturation", do: calib.Busy, busy: false, askedWith: []bool{false}},
		{name: "probe cannot claim during calibration", do: probe.Claim, busy: true, why: "a calibration is running"},
		{name: "a release by the wrong work frees nothing", do: func() (bool, string) { probe.Release(); return probe.Claim() }, busy: true, why: "a calibration is running"},
		{name: "calibration releases; live traffic holds the probe back", do: func() (bool, string) { calib.Release(); return probe.Claim() }, live: true, busy: true, why: "live traffic", askedWith: []bool{true}},
		{name: "a held-back claim took nothing", do: calib.Claim, busy: false, askedWith: []bool{true}},
	}
	for _, st := range steps {
		liveBusy, asked = st.live, nil
		busy, why := st.do()
		if busy != st.busy || !strings.Contains(why, st.why) || (st.why == "" && why != "") {
			t.Errorf("%s: busy=%v %q, want %v %q", st.name, busy, why, st.busy, st.why)
		}
		if len(asked) != len(st.askedWith) || (len(asked) > 0 && asked[len(asked)-1] != st.askedWith[len(st.askedWith)-1]) {
			t.Errorf("%s: live traffic asked with engineState %v, want %v", st.name, asked, st.askedWith)
		}
	}
}
