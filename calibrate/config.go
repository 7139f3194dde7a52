package calibrate

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/slogate/slogate/admission"
)

// Config returns the tiers file a calibration produces: base's tiers, each calibrated
// tier with its measured limits (a tier that could not be calibrated keeps base's), base's
// feedback, and the calibration itself as provenance — when, against what engine and
// model, each tier's SLO, every measured point and the rule that picked its knee — under
// the calibration key, which admission keeps without interpreting. Its rates are one
// engine budget (shared_rate): each was measured with its tier alone on the engine, and
// the tiers share it. The result is a valid tiers file that `slogate serve --tiers-file`
// accepts as it is.
func (r Result) Config(base admission.Config) (admission.Config, error) {
	cfg := admission.Config{Feedback: base.Feedback, SharedRate: true}
	measured := map[string]*admission.TierConfig{}
	for _, t := range r.Tiers {
		if t.Limits != nil {
			measured[t.Tier] = t.Limits
		}
	}
	for _, t := range base.Tiers {
		if m, ok := measured[t.Name]; ok {
			t = *m
		}
		cfg.Tiers = append(cfg.Tiers, t)
	}
	if err := cfg.Calibration.Encode(r); err != nil {
		return admission.Config{}, fmt.Errorf("calibrate: encoding the provenance: %w", err)
	}
	return cfg, cfg.Validate()
}

// commentText returns s as it can stand in a YAML comment: as it is, or quoted with Go
// escapes when it holds a line break (which would end the comment and start YAML
// content; an engine names the model), another unprintable character, or invalid UTF-8.
func commentText(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// WriteConfig writes cfg as a tiers file, with a comment saying where it came from.
func WriteConfig(w io.Writer, cfg admission.Config, r Result) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Tiers measured by slogate calibrate against %s (model %s) on %s.\n", commentText(r.Target), commentText(r.Model), r.Finished.UTC().Format(time.RFC3339))
	if r.Precision != "" {
		fmt.Fprintf(&b, "# Measured with %s.\n", commentText(r.Precision))
	}
	fmt.Fprintf(&b, "# Each calibrated tier's rate starts at 0.9 x its knee (the SLO feedback may raise it to\n# 1.5 x), its in-flight cap is twice the knee x mean E2E (Little's law); the points and\n# rules are under calibration. The rates are one engine budget (shared_rate): a request\n# costs 1/rate of an engine second, and the tiers together take at most one a second.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return fmt.Errorf("calibrate: encoding the tiers: %w", err)
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}
