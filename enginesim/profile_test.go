package enginesim

import (
	"slices"
	"strings"
	"testing"
)

func TestProfileValidate(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(p *Profile)
		wantErr string // "" for a valid profile
	}{
		{"small test profile", func(*Profile) {}, ""},
		{"context window equal to the cache", func(p *Profile) { p.MaxModelLen = p.KVCapacity() }, ""},
		{"budget one above the drafts", func(p *Profile) { p.MaxBatchedTokens, p.Speculation = 3, Speculation{2, 1} }, ""},
		{"no name", func(p *Profile) { p.Name = "" }, "name and a model"},
		{"no model", func(p *Profile) { p.Model = "" }, "name and a model"},
		{"zero context window", func(p *Profile) { p.MaxModelLen = 0 }, "positive"},
		{"negative batch size", func(p *Profile) { p.MaxNumSeqs = -1 }, "positive"},
		{"zero budget", func(p *Profile) { p.MaxBatchedTokens = 0 }, "positive"},
		{"zero block size", func(p *Profile) { p.BlockSize = 0 }, "positive"},
		{"zero blocks", func(p *Profile) { p.NumBlocks = 0 }, "positive"},
		{"zero vocabulary", func(p *Profile) { p.Vocab = 0 }, "positive"},
		{"context window past the cache", func(p *Profile) { p.MaxModelLen = p.KVCapacity() + 1 }, "exceeds KV capacity"},
		{"budget equal to the drafts", func(p *Profile) { p.MaxBatchedTokens, p.Speculation = 2, Speculation{2, 1} }, "cannot hold one speculative decode"},
		{"negative drafts", func(p *Profile) { p.Speculation.DraftTokens = -1 }, "accept rate in [0,1]"},
		{"accept rate above 1", func(p *Profile) { p.Speculation = Speculation{2, 1.5} }, "accept rate in [0,1]"},
		{"negative accept rate", func(p *Profile) { p.Speculation = Speculation{2, -0.1} }, "accept rate in [0,1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := schedProfile()
			tc.edit(&p)
			err := p.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestProfileBuiltins(t *testing.T) {
	names := ProfileNames()
	if len(names) == 0 || !slices.IsSorted(names) {
		t.Fatalf("ProfileNames() = %v, want a sorted non-empty list", names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			p, err := LookupProfile(name)
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != name {
				t.Errorf("LookupProfile(%q) returned profile %q", name, p.Name)
			}
			if err := p.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		if _, err := LookupProfile("no-such-profile"); err == nil || !strings.Contains(err.Error(), "no-such-profile") {
			t.Errorf("LookupProfile(unknown) = %v, want an error naming it", err)
		}
	})
}
