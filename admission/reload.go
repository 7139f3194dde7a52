package admission

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/slogate/slogate/clock"
)

// Reloader keeps a Controller's tiers in step with a tiers file: on request (SIGHUP, an
// admin endpoint) and when the file changes. A file that fails to load leaves the
// current tiers in force. Safe for concurrent use.
type Reloader struct {
	path  string
	ctrl  *Controller
	clock clock.Clock

	mu      sync.Mutex
	modTime time.Time
	status  ReloadStatus
}

// ReloadStatus is the outcome of the last reload.
type ReloadStatus struct {
	OK  bool      // the last attempt succeeded
	At  time.Time // when the last attempt was made
	Err error     // why it failed
}

// NewReloader returns a Reloader of path for ctrl. The caller has loaded the file once
// already (New needs a configuration); that counts as a successful reload.
func NewReloader(path string, ctrl *Controller) *Reloader {
	r := &Reloader{path: path, ctrl: ctrl, clock: ctrl.opts.Clock}
	if fi, err := os.Stat(path); err == nil {
		r.modTime = fi.ModTime()
	}
	r.status = ReloadStatus{OK: true, At: r.clock.Now()}
	return r
}

// Reload reads the file and applies it, recording the outcome.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	fi, statErr := os.Stat(r.path)
	cfg, err := LoadConfig(r.path)
	if err == nil {
		err = r.ctrl.Reload(cfg)
	}
	if statErr == nil {
		r.modTime = fi.ModTime()
	}
	r.status = ReloadStatus{OK: err == nil, At: r.clock.Now(), Err: err}
	return err
}

// Status returns the outcome of the last reload.
func (r *Reloader) Status() ReloadStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Watch reloads whenever the file's modification time changes (Kubernetes updates a
// mounted ConfigMap by swapping a symlink, which os.Stat follows), checking every
// interval until ctx is done.
func (r *Reloader) Watch(ctx context.Context, interval time.Duration) {
	t := r.clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		r.check()
	}
}

// check is one round of Watch: reload if the file's modification time changed; record
// a failure if the file cannot be read.
func (r *Reloader) check() {
	fi, err := os.Stat(r.path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) || r.Status().OK {
			r.fail(err)
		}
		return
	}
	r.mu.Lock()
	changed := !fi.ModTime().Equal(r.modTime)
	r.mu.Unlock()
	if changed {
		_ = r.Reload()
	}
}

// fail records a failure to read the file. The modification time is forgotten, so the
// file is reloaded when it comes back even with its old time (mv away and back).
func (r *Reloader) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.modTime = time.Time{}
	r.status = ReloadStatus{OK: false, At: r.clock.Now(), Err: err}
}
