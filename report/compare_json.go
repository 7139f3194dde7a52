package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/slogate/slogate/synth"
)

// CompareSchema names the layout of a comparison's JSON (WriteComparisonJSON); it
// changes when a field changes meaning or goes away.
const CompareSchema = "slogate.compare/v1"

// The JSON of a comparison, CompareSchema:
//
//	{"schema": "slogate.compare/v1",
//	 "workload": {"name": "context-matrix", "kind": "matrix"},
//	 "baseline": 0,                       // index in runs
//	 "runs": [{"name", "label", "source", "engine", "engine_version", "model",
//	           "started", "finished"}, ...],
//	 "differences": [{"what": "flag max_num_seqs", "values": ["256", "512"]}, ...],
//	 "cells": [{"row": "8K", "load": "64",  // synth.CellKey: a concurrency, or "1.5x"
//	            "runs": [{"state": "valid", "figures": {"output_tok_per_s": 2410,
//	                      "ttft_p95_s": 6.8, "tpot_p95_s": 0.031}}, ...],  // per run
//	            "best": {"output_tok_per_s": [1], ...},  // run indexes, ties all
//	            "changes": [{"run": 1, "figure": "output_tok_per_s", "base": 2410,
//	                         "value": 3570, "delta": 0.48, "noise": 0.06,
//	                         "movement": "better", "base_state": "valid",
//	                         "state": "valid"}, ...]}, ...]}
//
// A run's state of a cell it lacks is "not_run"; figures are a valid cell's, in the
// report's units (tokens/s, seconds), and absent otherwise. Changes are every headline
// figure of every run but the baseline, synth.Compare's judgement: delta and noise are
// shares (0.48 is +48%) and 0 unless both runs measured the figure; movement is a
// synth.Movement.
type comparisonJSON struct {
	Schema   string `json:"schema"`
	Workload struct {
		Name string     `json:"name"`
		Kind synth.Kind `json:"kind"`
	} `json:"workload"`
	Baseline    int          `json:"baseline"`
	Runs        []runJSON    `json:"runs"`
	Differences []Difference `json:"differences"`
	Cells       []cellJSON   `json:"cells"`
}

type runJSON struct {
	Name          string    `json:"name"`
	Label         string    `json:"label,omitempty"`
	Source        string    `json:"source,omitempty"`
	Engine        string    `json:"engine"`
	EngineVersion string    `json:"engine_version,omitempty"`
	Model         string    `json:"model"`
	Started       time.Time `json:"started"`
	Finished      time.Time `json:"finished"`
}

type cellJSON struct {
	Row     string           `json:"row"`
	Load    string           `json:"load"`
	Runs    []runCellJSON    `json:"runs"`
	Best    map[string][]int `json:"best,omitempty"`
	Changes []changeJSON     `json:"changes"`
}

type runCellJSON struct {
	State   synth.State        `json:"state"`
	Figures map[string]float64 `json:"figures,omitempty"`
}

type changeJSON struct {
	Run       int            `json:"run"`
	Figure    string         `json:"figure"`
	Base      float64        `json:"base"`
	Value     float64        `json:"value"`
	Delta     float64        `json:"delta"`
	Noise     float64        `json:"noise"`
	Movement  synth.Movement `json:"movement"`
	BaseState synth.State    `json:"base_state"`
	State     synth.State    `json:"state"`
}

// WriteComparisonJSON writes c as indented JSON of CompareSchema (documented above
// comparisonJSON). A password in a run's target is redacted. The document goes to w
// in a single Write.
func WriteComparisonJSON(w io.Writer, c Comparison) error {
	if err := c.check(); err != nil {
		return err
	}
	doc := comparisonJSON{Schema: CompareSchema, Baseline: c.Baseline, Differences: append([]Difference{}, c.Differences...)}
	doc.Workload.Name, doc.Workload.Kind = c.Runs[0].Report.Workload.Name, c.Runs[0].Report.Workload.Kind
	for _, r := range c.Runs {
		rep := r.Report
		doc.Runs = append(doc.Runs, runJSON{Name: r.Name, Label: rep.Label, Source: r.Source, Engine: rep.Engine,
			EngineVersion: rep.EngineVersion, Model: rep.Model, Started: rep.Started, Finished: rep.Finished})
	}
	for _, k := range c.Cells {
		cj := cellJSON{Row: k.Row, Load: k.Load, Best: map[string][]int{}, Changes: []changeJSON{}}
		for i := range c.Runs {
			cell, _ := c.Cell(i, k)
			rc := runCellJSON{State: cell.State}
			for _, f := range synth.Headline {
				if v, ok := c.figure(i, k, f); ok {
					if rc.Figures == nil {
						rc.Figures = map[string]float64{}
					}
					rc.Figures[f.Name] = v
				}
			}
			cj.Runs = append(cj.Runs, rc)
		}
		for _, f := range synth.Headline {
			if best := c.Best(k, f); best != nil {
				cj.Best[f.Name] = best
			}
		}
		for i := range c.Runs {
			if i == c.Baseline {
				continue
			}
			for _, f := range synth.Headline {
				ch := c.Change(i, k, f)
				cj.Changes = append(cj.Changes, changeJSON{Run: i, Figure: f.Name, Base: ch.Base, Value: ch.Value, Delta: ch.Delta,
					Noise: ch.Noise, Movement: ch.Moved, BaseState: ch.BaseSt, State: ch.ValueSt})
			}
		}
		doc.Cells = append(doc.Cells, cj)
	}
	return writeIndented(w, doc, "the comparison")
}

// check refuses a comparison NewComparison did not build, or whose baseline is no run.
func (c Comparison) check() error {
	switch {
	case len(c.cells) != len(c.Runs) || len(c.Runs) < 2:
		return errors.New("report: a comparison not built by NewComparison")
	case c.Baseline < 0 || c.Baseline >= len(c.Runs):
		return fmt.Errorf("report: baseline %d is not one of the %d runs", c.Baseline, len(c.Runs))
	}
	return nil
}

// ComparisonFiles are the files WriteComparisonFiles writes, by writer.
var ComparisonFiles = []struct {
	Name  string
	Write func(io.Writer, Comparison) error
}{
	{"comparison.json", WriteComparisonJSON},
	{"comparison.md", WriteComparisonMarkdown},
	{"comparison.html", WriteComparisonHTML},
}

// WriteComparisonFiles writes c in every form into dir (created if missing) as
// comparison.json, comparison.md and comparison.html. A file it could not write is
// named in the error.
func WriteComparisonFiles(dir string, c Comparison) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, form := range ComparisonFiles {
		if err := writeFile(dir, form.Name, func(w io.Writer) error { return form.Write(w, c) }); err != nil {
			return err
		}
	}
	return nil
}
