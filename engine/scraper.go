package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/internal/signal"
)

// maxExposition bounds the metrics body read from the engine.
const maxExposition = 16 << 20

// metricsAccept is the Accept header of a /metrics read: the text format 0.0.4.
const metricsAccept = "text/plain;version=0.0.4"

// ErrNotScraped is the error of the snapshot a Scraper holds before its first scrape.
var ErrNotScraped = errors.New("engine: not scraped yet")

// ErrTooLarge reports a metrics body above the size limit. Such a body is rejected, not
// read in part: a prefix that ends at a line boundary would parse as a valid but
// incomplete exposition.
var ErrTooLarge = errors.New("engine: metrics exposition too large")

// ErrStatus reports an engine endpoint answering with a status other than 200 OK.
var ErrStatus = errors.New("engine: unexpected HTTP status")

// Scraper reads the engine's /metrics (and /v1/models) and keeps the latest Snapshot.
// Latest and UnknownModel are safe for concurrent use; Scrape and Run must not run
// concurrently with each other.
type Scraper struct {
	base     string
	apiKey   string
	client   *http.Client
	kind     Kind
	interval time.Duration
	clock    clock.Clock

	maxBody int64         // limit of the metrics body; maxExposition but in tests
	timeout time.Duration // of a /v1/models read started by UnknownModel

	latest  atomic.Pointer[Snapshot]
	storeMu sync.Mutex     // guards stored, taken when latest is stored
	stored  signal.Changed // of latest (Await)

	mu       sync.Mutex // guards the fields below (held by Scrape, and by a re-read to store its answer)
	window   window
	models   []string
	modelsAt time.Time

	recheck recheck // the /v1/models reads UnknownModel starts (models.go)
	health  health  // the last answer of /health (health.go); guarded by mu
}

// ScraperConfig configures a Scraper.
type ScraperConfig struct {
	BaseURL  string        // the engine's base URL, e.g. http://127.0.0.1:8000
	Kind     Kind          // KindAuto detects the engine from its metric names
	Interval time.Duration // time between scrapes in Run; default 1s
	Timeout  time.Duration // per request; default the interval
	Client   *http.Client  // default: a client with Timeout
	APIKey   string        // sent as a bearer token, for engines started with --api-key
	Clock    clock.Clock   // scrape times, Run's interval, /health and /v1/models ages; default clock.Real
}

// NewScraper returns a Scraper for cfg. Until the first scrape, Latest reports the engine
// down with every measurement unknown.
func NewScraper(cfg ScraperConfig) *Scraper {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = cfg.Interval
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.Timeout}
	}
	cfg.Clock = clock.Or(cfg.Clock)
	s := &Scraper{
		base: strings.TrimRight(cfg.BaseURL, "/"), apiKey: cfg.APIKey, client: cfg.Client, kind: cfg.Kind,
		interval: cfg.Interval, clock: cfg.Clock, maxBody: maxExposition, timeout: cfg.Timeout,
	}
	first := NewSnapshot()
	first.Kind = cfg.Kind
	first.Err = ErrNotScraped
	s.latest.Store(&first)
	return s
}

// Latest returns the most recent snapshot. Its At field says how fresh it is: a failed
// scrape keeps the last good measurements and marks the snapshot down.
func (s *Scraper) Latest() Snapshot { return *s.latest.Load() }

// Run scrapes every interval until ctx is done, then returns nil.
func (s *Scraper) Run(ctx context.Context) error {
	t := s.clock.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.Scrape(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// store makes snap the latest snapshot and wakes Await.
func (s *Scraper) store(snap *Snapshot) {
	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	s.latest.Store(snap)
	s.stored.Broadcast()
}

// Await returns the latest snapshot once cond holds for it, checking each snapshot as it
// is stored (by a scrape, or a read of /v1/models that UnknownModel started); or the last
// one and ctx's error once ctx is done. Safe for concurrent use.
func (s *Scraper) Await(ctx context.Context, cond func(Snapshot) bool) (Snapshot, error) {
	return signal.Await(ctx, func() (Snapshot, <-chan struct{}) {
		s.storeMu.Lock()
		defer s.storeMu.Unlock()
		return s.Latest(), s.stored.C()
	}, cond)
}

// Scrape reads the engine once, stores and returns the new snapshot.
func (s *Scraper) Scrape(ctx context.Context) Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd, err := s.readMetrics(ctx)
	if err == nil {
		err = s.checkHealth(ctx)
	}
	if err != nil {
		down := s.Latest()
		down.Up, down.Err = false, err
		s.store(&down)
		return down
	}
	now := s.clock.Now()
	snap := rd.snapshot(s.window.add(now, rd))
	snap.Up, snap.At = true, now
	snap.Models = s.servedModels(ctx)
	s.store(&snap)
	return snap
}

func (s *Scraper) readMetrics(ctx context.Context) (reading, error) {
	resp, err := s.get(ctx, "/metrics", metricsAccept)
	if err != nil {
		return reading{}, err
	}
	defer resp.Body.Close()
	fams, err := s.families(resp)
	if err != nil {
		return reading{}, err
	}
	return read(fams, s.kind)
}

// families parses the exposition of a /metrics response, at most s.maxBody bytes.
func (s *Scraper) families(resp *http.Response) (map[string]*dto.MetricFamily, error) {
	fams, err := parseExposition(&limitedReader{r: resp.Body, n: s.maxBody})
	if errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("%w: the body exceeds %d bytes and was not parsed", ErrTooLarge, s.maxBody)
	}
	if err != nil {
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			// We ask for text 0.0.4; say what the engine sent instead.
			return nil, fmt.Errorf("%w (Content-Type %q)", err, ct)
		}
		return nil, err
	}
	return fams, nil
}

// limitedReader reads at most n bytes from r and then fails with ErrTooLarge if r holds
// more, unlike io.LimitReader, which ends a longer body silently.
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		var probe [1]byte
		n, err := l.r.Read(probe[:])
		if n > 0 {
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// get sends a GET for path and returns the response if it is 200 OK; the caller closes
// its body.
func (s *Scraper) get(ctx context.Context, path, accept string) (*http.Response, error) {
	resp, err := s.send(ctx, path, accept)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: GET %s: %s", ErrStatus, path, resp.Status)
	}
	return resp, nil
}

// send sends a GET for path and returns the response whatever its status; the caller
// closes its body.
func (s *Scraper) send(ctx context.Context, path, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	if s.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("engine: GET %s: %w", path, err)
	}
	return resp, nil
}
