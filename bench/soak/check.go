package soak

import (
	"fmt"
	"maps"
	"slices"
)

// Check compares the tally with slogate's own count of the same requests:
// slogate_requests_total summed by its code label (the status the client got; 499 when
// the client went away before the answer ended). It returns every disagreement, none
// when the counts add up:
//
//   - slogate counted every request its handler certainly read, and at most the uncertain
//     ones besides;
//   - for every status, slogate counted as many requests as their clients got it, and at
//     most the requests of unknown status besides (cancelled before their status came, or
//     uncertain); 200 and 499 count together, for a client that leaves a stream after its
//     200 is counted with 499.
func (t *Tally) Check(byCode map[int]float64) []string {
	counted, unread := t.Counted()
	uncertain := t.Uncertain()
	var problems []string
	var total float64
	for _, n := range byCode {
		total += n
	}
	if total < float64(counted) || total > float64(counted+uncertain) {
		problems = append(problems, fmt.Sprintf("slogate counted %.0f requests; its handler certainly read %d, and %d more may have reached it", total, counted, uncertain))
	}
	statuses := t.Statuses()
	codes := make(map[int]bool)
	for c := range byCode {
		codes[c] = true
	}
	for c := range statuses {
		codes[c] = true
	}
	delete(codes, 499)
	slack := unread + uncertain
	for _, c := range slices.Sorted(maps.Keys(codes)) {
		got, want := byCode[c], statuses[c]
		what := fmt.Sprintf("status %d", c)
		if c == 200 {
			got += byCode[499]
			what = "status 200 (and 499)"
		}
		if got < float64(want) || got > float64(want+slack) {
			problems = append(problems, fmt.Sprintf("slogate counted %.0f requests of %s; their clients got %d, and %d more are of unknown status", got, what, want, slack))
		}
	}
	return problems
}
