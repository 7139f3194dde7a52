// Package history keeps the last runs of each scheduled probe workload on disk, one
// report JSON file per run (package report's format) in one directory, so that they
// survive a restart; it compares each run with the one before it by synth's one rule
// (synth.Compare, synth.Regressions), which is what the sidecar exports as
// slogate_probe_regression and shows on its status page.
package history

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/synth"
)

// ErrNotFound reports a run the store does not hold (any more).
var ErrNotFound = errors.New("history: no such run")

// Config configures a Store.
type Config struct {
	Dir    string // the directory of the runs' files; created if missing
	Runs   int    // runs kept per workload; at least 1
	Bytes  int64  // total size of the runs kept, all workloads together; positive
	Logger *slog.Logger
}

// Store holds the last Config.Runs runs of each workload, and no more than Config.Bytes
// of them in all, as files in Config.Dir named <sequence>-<workload>.json (the workload's
// name with every character but letters, digits, '.', '_' and '-' replaced by '_').
//
// Guarantees:
//   - A file is written whole or not at all: to a temporary file in Dir, synced, then
//     renamed into place. Temporary files an interrupted write left are removed on Open.
//   - Open reads back every run in Dir, in the order they were appended (by sequence,
//     not by clock), and compares each with the one before it as Append did. A file it
//     cannot read (damaged, or of another report schema) is logged as a warning, left in
//     place and skipped; it never stops Open.
//   - Beyond the bounds the oldest runs go, file and all: the oldest of a workload past
//     Runs, then the oldest of all while the total is past Bytes — except the newest run
//     of each workload, which is always kept, even alone larger than Bytes, so that the
//     latest result is never lost to the bound.
//   - A run is named by an ID the store gave it; IDs are looked up among the runs held,
//     never joined to a path, so no ID can reach outside Dir.
//
// Safe for concurrent use. The reports it returns share memory with those it holds: do
// not modify them.
type Store struct {
	cfg  Config
	mu   sync.Mutex
	runs []*entry // oldest first, all workloads
	next int      // the sequence of the next file
	size int64    // the total size of runs
	// base is, per workload, the latest run that measured cells: what the next run of
	// the workload is compared with.
	base map[string]*entry
}

// entry is one run held by the store.
type entry struct {
	run  Run
	seq  int
	file string        // the base name of its file; "" when writing it failed
	rep  *synth.Report // nil but for the newest run of a workload, its base, and runs without a file (see release)
}

// fileName matches the files of runs: <sequence>-<workload>.json.
var fileName = regexp.MustCompile(`^([0-9]{1,18})-([A-Za-z0-9._-]+)\.json$`)

// tempPrefix starts the names of files being written.
const tempPrefix = ".tmp-"

// Open opens the store of cfg: it creates Config.Dir if missing, reads back the runs in
// it, and removes those beyond the bounds.
func Open(cfg Config) (*Store, error) {
	switch {
	case cfg.Dir == "":
		return nil, errors.New("history: no directory")
	case cfg.Runs < 1:
		return nil, fmt.Errorf("history: %d runs per workload: want at least 1", cfg.Runs)
	case cfg.Bytes <= 0:
		return nil, fmt.Errorf("history: a bound of %d bytes: want a positive one", cfg.Bytes)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	s := &Store{cfg: cfg, next: 1, base: map[string]*entry{}}
	if err := s.load(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prune()
	return s, nil
}

// load reads back the runs in the directory, oldest first.
func (s *Store) load() error {
	dirents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	type found struct {
		seq  int
		name string
	}
	var files []found
	for _, d := range dirents {
		name := d.Name()
		if strings.HasPrefix(name, tempPrefix) {
			if err := os.Remove(filepath.Join(s.cfg.Dir, name)); err != nil {
				s.cfg.Logger.Warn("probe history: cannot remove an unfinished file", "file", name, "err", err)
			}
			continue
		}
		m := fileName.FindStringSubmatch(name)
		if m == nil || !d.Type().IsRegular() {
			continue // not a run's file
		}
		seq, _ := strconv.Atoi(m[1]) // at most 18 digits: no overflow
		files = append(files, found{seq, name})
		s.next = max(s.next, seq+1)
	}
	slices.SortFunc(files, func(a, b found) int { return a.seq - b.seq })
	for _, f := range files {
		rep, size, err := readFile(filepath.Join(s.cfg.Dir, f.name))
		if err != nil {
			s.cfg.Logger.Warn("probe history: skipping a file it cannot read; it stays in place", "file", f.name, "err", err)
			continue
		}
		s.add(&entry{seq: f.seq, file: f.name, rep: &rep}, size)
	}
	if len(s.runs) > 0 {
		s.cfg.Logger.Info("probe history loaded", "dir", s.cfg.Dir, "runs", len(s.runs), "bytes", s.size)
	}
	return nil
}

// readFile reads a report and its size.
func readFile(path string) (synth.Report, int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return synth.Report{}, 0, err
	}
	rep, err := report.ReadJSON(bytes.NewReader(data))
	return rep, int64(len(data)), err
}

// Append stores rep as the newest run of its workload, compares it with the run before
// (see Run.Previous) and removes what the bounds no longer hold. It returns the run as
// stored. When writing its file fails, the run is still held, in memory (Run.Stored is
// false), and the error says why.
func (s *Store) Append(rep synth.Report) (Run, error) {
	// The run in memory is the run on disk: WriteJSON sets the schema and redacts the
	// target.
	rep.Schema, rep.Target = synth.SchemaVersion, rep.RedactedTarget()
	var buf bytes.Buffer
	encErr := report.WriteJSON(&buf, rep)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &entry{seq: s.next, rep: &rep}
	s.next++
	err := encErr
	if err == nil {
		name := fmt.Sprintf("%06d-%s.json", e.seq, safeName(rep.Workload.Name))
		if err = writeFile(s.cfg.Dir, name, buf.Bytes()); err == nil {
			e.file = name
		}
	}
	s.add(e, int64(buf.Len()))
	s.prune()
	if err != nil {
		return e.run, fmt.Errorf("history: storing the run of %s: %w", rep.Workload.Name, err)
	}
	return e.run, nil
}

// writeFile writes data to dir/name whole or not at all.
func writeFile(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o640)
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The rename itself survives a crash once the directory is synced; where directories
	// cannot be synced, the file is still whole.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// safeName is a workload's name as it may stand in a file name: letters, digits, '.',
// '_' and '-', every other byte replaced by '_', at most 64 bytes, never empty.
func safeName(workload string) string {
	b := []byte(workload)
	if len(b) > 64 {
		b = b[:64]
	}
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "workload"
	}
	return string(b)
}

// add summarises e's report, compares it with its workload's base, and holds it as the
// newest run. The caller holds s.mu, or is Open.
func (s *Store) add(e *entry, size int64) {
	rep := *e.rep
	w := rep.Workload.Name
	e.run = summarise(rep)
	e.run.ID = fmt.Sprintf("%06d-%s", e.seq, safeName(w))
	if e.file != "" {
		e.run.ID = strings.TrimSuffix(e.file, ".json")
	}
	e.run.Bytes, e.run.Stored = size, e.file != ""
	if b := s.base[w]; b != nil && comparable(*b.rep, rep) {
		e.run.Previous, e.run.Changes = b.run.ID, compare(*b.rep, rep)
	}
	s.runs = append(s.runs, e)
	s.size += size
	if len(rep.Cells) > 0 {
		s.base[w] = e
	}
	s.release(w)
}

// release lets go of the reports of workload w that need not stay in memory: all but
// the newest run's, the base's, and those of runs without a file. The caller holds s.mu.
func (s *Store) release(w string) {
	newest := s.newest(w)
	for _, e := range s.runs {
		if e.run.Workload == w && e.file != "" && e != newest && e != s.base[w] {
			e.rep = nil
		}
	}
}

// newest returns the newest run of workload w, or nil.
func (s *Store) newest(w string) *entry {
	for i := len(s.runs) - 1; i >= 0; i-- {
		if s.runs[i].run.Workload == w {
			return s.runs[i]
		}
	}
	return nil
}

// prune removes the runs beyond the bounds. The caller holds s.mu.
func (s *Store) prune() {
	perWorkload := map[string]int{}
	newest := map[*entry]bool{}
	var keep []*entry
	for i := len(s.runs) - 1; i >= 0; i-- { // newest first
		e := s.runs[i]
		n := perWorkload[e.run.Workload]
		perWorkload[e.run.Workload] = n + 1
		if n == 0 {
			newest[e] = true
		}
		if n >= s.cfg.Runs {
			s.remove(e, "runs")
			continue
		}
		keep = append(keep, e)
	}
	slices.Reverse(keep) // oldest first again
	for i := 0; i < len(keep) && s.size > s.cfg.Bytes; {
		if newest[keep[i]] {
			i++
			continue
		}
		s.remove(keep[i], "bytes")
		keep = slices.Delete(keep, i, i+1)
	}
	s.runs = keep
}

// remove drops e and its file. The caller holds s.mu and takes e out of s.runs.
func (s *Store) remove(e *entry, bound string) {
	s.size -= e.run.Bytes
	if s.base[e.run.Workload] == e {
		delete(s.base, e.run.Workload)
	}
	if e.file == "" {
		return
	}
	if err := os.Remove(filepath.Join(s.cfg.Dir, e.file)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.cfg.Logger.Warn("probe history: cannot remove a run beyond the bound", "file", e.file, "bound", bound, "err", err)
	}
}

// Runs returns the runs held, newest first, all workloads together.
func (s *Store) Runs() []Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Run, 0, len(s.runs))
	for i := len(s.runs) - 1; i >= 0; i-- {
		out = append(out, s.runs[i].run)
	}
	return out
}

// Latest returns the newest run of workload w and its report.
func (s *Store) Latest(w string) (Run, synth.Report, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.newest(w)
	if e == nil {
		return Run{}, synth.Report{}, false
	}
	return e.run, *e.rep, true
}

// Report returns the report of the run id names, read from its file; an error wrapping
// ErrNotFound when the store does not hold that run.
func (s *Store) Report(id string) (synth.Report, error) {
	s.mu.Lock()
	var path string
	var held *synth.Report
	for _, e := range s.runs {
		if e.run.ID == id {
			path, held = filepath.Join(s.cfg.Dir, e.file), e.rep
			if e.file == "" {
				path = ""
			}
			break
		}
	}
	s.mu.Unlock()
	switch {
	case held != nil:
		return *held, nil
	case path == "":
		return synth.Report{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	rep, _, err := readFile(path)
	if errors.Is(err, os.ErrNotExist) { // removed by a bound since
		return synth.Report{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return rep, err
}
