package admission

import (
	"net/http"
	"testing"
)

func TestEnumNames(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons() {
		n := r.String()
		if n == "" || n == "unknown" || seen[n] {
			t.Errorf("reason %d named %q", r, n)
		}
		seen[n] = true
	}
	if len(Reasons()) != int(numReasons) || NoReason.String() != "none" || Reason(200).String() != "unknown" {
		t.Errorf("reasons %v", Reasons())
	}
	for r, want := range map[Reason]string{TierRate: "tier-rate", QueueFull: "queue-full", QueueTimeout: "queue-timeout",
		PredictedLate: "predicted-late", Saturated: "saturated", EngineDown: "engine-down", EngineBudget: "engine-budget",
		PrefillBacklog: "prefill-backlog"} {
		if r.String() != want {
			t.Errorf("%d: %q, want %q", r, r.String(), want)
		}
	}
	if Admitted.String() != "admitted" || Queued.String() != "queued" || Rejected.String() != "rejected" || Verdict(9).String() != "unknown" {
		t.Error("verdict names")
	}
	if len(Classes()) != int(numClasses) || Probe.String() != "probe" || Class(9).String() != "unknown" {
		t.Error("class names")
	}
	if Mode(9).String() != "enforce" || Off.String() != "off" || Shadow.String() != "shadow" {
		t.Error("mode names")
	}
}

func TestRejectionStatus(t *testing.T) {
	for _, r := range Reasons() {
		want := http.StatusTooManyRequests
		if r == EngineDown {
			want = http.StatusServiceUnavailable
		}
		rej := reject(&tierState{cfg: TierConfig{Name: "t"}}, r, -1, "why %d", 7)
		if rej.Status() != want || rej.RetryAfter != 0 || rej.Error() != "slogate: tier t: why 7" {
			t.Errorf("%s: %+v status %d", r, rej, rej.Status())
		}
	}
}
