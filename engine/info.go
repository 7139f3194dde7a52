package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Info is how the engine was run, as far as it tells: its version and the settings it
// reports, by the engine's own names, so that two runs can say what differed. The zero
// value is an engine that tells nothing.
type Info struct {
	Version string            // "" when the engine does not say
	Flags   map[string]string // setting name -> value as the engine renders it; nil when none
}

// Bounds of what Info keeps and reads.
const (
	maxFlags       = 512      // settings kept at most, the first by name
	maxFlagName    = 128      // bytes of a setting's name; a longer one is dropped
	maxFlagValue   = 256      // bytes of a setting's value; a longer one is dropped
	maxVersion     = 128      // bytes of a version; a longer one is an error
	maxVersionBody = 64 << 10 // bytes of GET /version
	maxServerInfo  = 8 << 20  // bytes of SGLang's server info (server arguments again per DP rank)
)

// ErrInfo reports an answer of the engine about itself that is not of the shape the
// engine writes.
var ErrInfo = errors.New("engine: malformed engine info")

// Info reads how the engine runs. On vLLM: the version from GET /version
// (vllm/entrypoints/serve/instrumentator/basic.py, show_version: {"version":
// VLLM_VERSION}) and the labels of vllm:cache_config_info from /metrics, which are every
// field of its CacheConfig as Python's str() writes it (vllm/v1/metrics/loggers.py,
// log_metrics_info; vllm/config/cache.py, metrics_info). vLLM exports no other settings:
// cache_config is the one type log_metrics_info knows, and /server_info, which has the
// whole config, is served only in development mode and carries the environment, so it is
// not read. On SGLang: the labels of sglang:cache_config_info (page_size, num_pages;
// observability/metrics_collector.py), then over them the server arguments of GET
// /server_info, or of /get_server_info where that is missing (releases before the
// rename): dataclasses.asdict(server_args) merged with the scheduler's info
// (max_total_num_tokens, max_req_input_len), the per-DP "internal_states" and "version"
// (python/sglang/srt/entrypoints/http_server.py, get_server_info).
//
// What it keeps of the server arguments: strings, numbers (as JSON writes them) and
// booleans ("true", "false"); lists of such scalars as compact JSON text when they fit in
// maxFlagValue bytes. It skips what is null (not set), objects, lists holding anything
// else, strings holding a JSON object (free-form configuration such as
// model_loader_extra_config, which may carry a storage credential), "internal_states"
// (runtime state per DP rank, the arguments again) and "status". It never keeps a
// credential: a setting named as one (a part password, passwd, secret or credential(s),
// or a last part key, keys, apikey or token: api_key, admin_api_key,
// ssl_keyfile_password, hf_token) is dropped whatever its value, as is a value that is a
// URL with user information. The identity labels of the info metrics (engine, dp_rank,
// tp_rank, pp_rank, model_name, ...) are not settings and are dropped; of several
// data-parallel engines the first one's labels count. At most maxFlags settings are kept
// (the first by name), names and values within their byte bounds.
//
// The engine is the scraper's kind: the configured one, else the one its last scrape
// detected, else the one /metrics shows. An endpoint the engine does not serve (404 or
// 405: an older release, SGLang without --enable-metrics) adds nothing and is no error.
// Any other failure (transport, status, a malformed or oversized answer) is returned,
// joined, beside what the other reads gave: the Info is usable either way. Info is safe
// for concurrent use, also with Scrape and Run.
func (s *Scraper) Info(ctx context.Context) (Info, error) {
	kind := s.kind
	if kind == KindAuto {
		kind = s.Latest().Kind
	}
	var errs []error
	fams, err := s.readFamilies(ctx)
	if err != nil && !errors.Is(err, errMissing) {
		errs = append(errs, err)
	}
	t := tableFor(kind)
	if t == nil && fams != nil {
		t = detect(fams)
	}
	if t == nil {
		return Info{}, errors.Join(append(errs, fmt.Errorf("%w: cannot tell which engine to ask", ErrUnrecognised))...)
	}
	var info Info
	if f, ok := fams[t.capacityInfo]; ok {
		info.Flags = infoLabels(f)
	}
	var version string
	var flags map[string]string
	switch t.kind {
	case KindVLLM:
		version, err = s.readVersion(ctx)
	case KindSGLang:
		version, flags, err = s.readServerInfo(ctx)
	}
	if err != nil {
		errs = append(errs, err)
	}
	info.Version = version
	for k, v := range flags {
		if info.Flags == nil {
			info.Flags = make(map[string]string, len(flags))
		}
		info.Flags[k] = v
	}
	info.Flags = bounded(info.Flags)
	return info, errors.Join(errs...)
}

// errMissing reports an endpoint the engine does not serve (404 or 405).
var errMissing = errors.New("engine: endpoint not served")

// readInfo returns the body of GET path, at most limit bytes; errMissing when the engine
// does not serve path.
func (s *Scraper) readInfo(ctx context.Context, path string, limit int64) ([]byte, error) {
	resp, err := s.send(ctx, path, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil, errMissing
	default:
		return nil, fmt.Errorf("%w: GET %s: %s", ErrStatus, path, resp.Status)
	}
	body, err := io.ReadAll(&limitedReader{r: resp.Body, n: limit})
	if errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("%w: GET %s: the body exceeds %d bytes", ErrTooLarge, path, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: GET %s: %w", path, err)
	}
	return body, nil
}

// readVersion reads vLLM's GET /version; "" and no error where it is missing.
func (s *Scraper) readVersion(ctx context.Context) (string, error) {
	body, err := s.readInfo(ctx, "/version", maxVersionBody)
	if errors.Is(err, errMissing) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	v, err := parseVersion(body)
	if err != nil {
		return "", fmt.Errorf("GET /version: %w", err)
	}
	return v, nil
}

// readServerInfo reads SGLang's GET /server_info, or /get_server_info where that is
// missing; nothing and no error where both are.
func (s *Scraper) readServerInfo(ctx context.Context) (string, map[string]string, error) {
	for _, path := range []string{"/server_info", "/get_server_info"} {
		body, err := s.readInfo(ctx, path, maxServerInfo)
		if errors.Is(err, errMissing) {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		v, flags, err := parseServerInfo(body)
		if err != nil {
			return "", nil, fmt.Errorf("GET %s: %w", path, err)
		}
		return v, flags, nil
	}
	return "", nil, nil
}

// parseVersion reads vLLM's {"version": "0.11.0"}; "" when it names none.
func parseVersion(body []byte) (string, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInfo, err)
	}
	if doc == nil {
		return "", fmt.Errorf("%w: not a JSON object", ErrInfo)
	}
	return versionOf(doc)
}

// versionOf returns doc's "version": a string of at most maxVersion bytes, or "" when
// absent or null.
func versionOf(doc map[string]json.RawMessage) (string, error) {
	raw, ok := doc["version"]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("%w: version is not a string", ErrInfo)
	}
	if len(v) > maxVersion {
		return "", fmt.Errorf("%w: version is longer than %d bytes", ErrInfo, maxVersion)
	}
	return strings.TrimSpace(v), nil
}

// parseServerInfo reads SGLang's server info: the version and the settings Info keeps
// (see Info).
func parseServerInfo(body []byte) (string, map[string]string, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrInfo, err)
	}
	if doc == nil {
		return "", nil, fmt.Errorf("%w: not a JSON object", ErrInfo)
	}
	version, err := versionOf(doc)
	if err != nil {
		return "", nil, err
	}
	flags := make(map[string]string, len(doc))
	for name, raw := range doc {
		switch name {
		case "version", "status", "internal_states":
			continue
		}
		if v, ok := scalarText(raw); ok {
			addFlag(flags, name, v)
		}
	}
	return version, bounded(flags), nil
}

// scalarText renders a JSON value as a flag value: a string as it is (unless it holds a
// JSON object), a number or boolean as JSON writes it, a list of scalars as compact JSON;
// ok false for null, objects and anything else.
func scalarText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case 'n', '{':
		return "", false
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil || strings.HasPrefix(strings.TrimSpace(s), "{") {
			return "", false
		}
		return s, true
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return "", false
		}
		for _, it := range items {
			if it = bytes.TrimSpace(it); len(it) == 0 || it[0] == '{' || it[0] == '[' {
				return "", false
			}
		}
		var out bytes.Buffer
		if json.Compact(&out, raw) != nil {
			return "", false
		}
		return out.String(), true
	}
	return string(raw), true // a number, true or false: the decoder checked it is JSON
}

// infoLabels returns the settings an info metric's labels carry: those of the series
// that sorts first (the first data-parallel engine's), without the identity labels.
func infoLabels(f *dto.MetricFamily) map[string]string {
	ms := f.GetMetric()
	if len(ms) == 0 {
		return nil
	}
	keys := make([]string, len(ms))
	for i, m := range ms {
		var b strings.Builder
		for _, lp := range m.GetLabel() {
			b.WriteString(lp.GetName() + "=" + lp.GetValue() + "\x00")
		}
		keys[i] = b.String()
	}
	first := 0
	for i := range keys {
		if keys[i] < keys[first] {
			first = i
		}
	}
	flags := make(map[string]string, len(ms[first].GetLabel()))
	for _, lp := range ms[first].GetLabel() {
		if !identityLabels[lp.GetName()] {
			addFlag(flags, lp.GetName(), lp.GetValue())
		}
	}
	return flags
}

// identityLabels name the series of an info metric, not a setting: vLLM's engine index
// (loggers.py) and SGLang's collector labels (scheduler_metrics_mixin.py).
var identityLabels = map[string]bool{
	"engine": true, "model_name": true, "engine_type": true, "tp_rank": true, "pp_rank": true,
	"dp_rank": true, "moe_ep_rank": true, "pid": true,
}

// addFlag records name = value unless either is out of bounds or it is a credential.
func addFlag(flags map[string]string, name, value string) {
	if name == "" || len(name) > maxFlagName || len(value) > maxFlagValue || secretName(name) || secretValue(value) {
		return
	}
	flags[name] = value
}

// secretName reports whether a setting's name says it holds a credential: a part
// password, passwd, secret(s) or credential(s), or a last part key, keys, apikey or token
// (parts split at '_', '-' and '.', case folded). Names that only count tokens
// (max_total_tokens) or point at a key's file (ssl_keyfile) are not.
func secretName(name string) bool {
	parts := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '_' || r == '-' || r == '.' })
	if len(parts) == 0 {
		return false
	}
	for _, p := range parts {
		switch p {
		case "password", "passwd", "secret", "secrets", "credential", "credentials":
			return true
		}
	}
	switch parts[len(parts)-1] {
	case "key", "keys", "apikey", "token":
		return true
	}
	return false
}

// secretValue reports whether a value is a URL carrying user information (a password
// or a token in place of a user name).
func secretValue(v string) bool {
	if !strings.Contains(v, "@") || !strings.Contains(v, "://") {
		return false
	}
	u, err := url.Parse(strings.TrimSpace(v))
	return err != nil || u.User != nil
}

// bounded returns flags with at most maxFlags entries, the first by name; nil if empty.
func bounded(flags map[string]string) map[string]string {
	if len(flags) == 0 {
		return nil
	}
	if len(flags) <= maxFlags {
		return flags
	}
	names := make([]string, 0, len(flags))
	for k := range flags {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names[maxFlags:] {
		delete(flags, k)
	}
	return flags
}

// readFamilies reads the metric families of /metrics; errMissing when it is not served.
func (s *Scraper) readFamilies(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	resp, err := s.send(ctx, "/metrics", metricsAccept)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return s.families(resp)
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return nil, errMissing
	}
	return nil, fmt.Errorf("%w: GET /metrics: %s", ErrStatus, resp.Status)
}
