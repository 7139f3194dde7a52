package soak

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	// The clients: 10 streams that got 200 (2 of them then left), 3 rejected, 1 400, one
	// cancelled while queued before its status came, and a passthrough slogate never
	// counts.
	var tally Tally
	for range 10 {
		tally.add(StreamCompletion, NoFault, end{outcome: OK, status: 200, reached: true})
	}
	for range 3 {
		tally.add(StreamChat, NoFault, end{outcome: Rejected, status: 429, reached: true})
	}
	tally.add(Malformed, NoFault, end{outcome: BadRequest, status: 400, reached: true})
	tally.add(CancelWaiting, NoFault, end{outcome: Cancelled, reached: true})
	tally.add(Passthrough, NoFault, end{outcome: OK, status: 200, reached: true})

	cases := []struct {
		name   string
		byCode map[int]float64
		want   []string // substrings of the problems, in order
	}{
		{name: "the cancelled one counted as 499", byCode: map[int]float64{200: 8, 499: 3, 429: 3, 400: 1}},
		{name: "the cancelled one counted as 429", byCode: map[int]float64{200: 8, 499: 2, 429: 4, 400: 1}},
		{name: "a request lost", byCode: map[int]float64{200: 8, 499: 2, 429: 3, 400: 1},
			want: []string{"slogate counted 14 requests; its handler certainly read 15"}},
		{name: "a 400 counted as 429", byCode: map[int]float64{200: 9, 499: 2, 429: 4},
			want: []string{"of status 400; their clients got 1"}},
		{name: "502s the clients never saw", byCode: map[int]float64{200: 8, 499: 1, 429: 3, 400: 1, 502: 2},
			want: []string{"of status 200 (and 499); their clients got 10", "of status 502; their clients got 0, and 1 more"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tally.Check(tc.byCode)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %q lacks %q", got[i], w)
				}
			}
		})
	}
}
