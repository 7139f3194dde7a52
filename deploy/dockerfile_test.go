package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// This file checks the repository's Dockerfile with a small parser of its own (the subset
// of the Dockerfile syntax it needs: instructions, line continuations, comments, quoted
// words, ARG defaults in FROM), so the tests need no BuildKit dependency.

// instruction is one Dockerfile instruction: its keyword (upper case) and the rest.
type instruction struct {
	Cmd, Args string
	Line      int
}

// stage is the instructions from one FROM to the next.
type stage struct {
	Base, Name string // the image (ARGs expanded) and the AS name
	Insts      []instruction
}

// parseDockerfile splits a Dockerfile into instructions, joining continued lines and
// dropping comments.
func parseDockerfile(src string) []instruction {
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || trimmed == "" && cur.Len() == 0 {
			continue // a comment, also inside a continuation; or a blank line between instructions
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if body, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(strings.TrimSpace(body) + " ")
			continue
		}
		cur.WriteString(trimmed)
		out = appendInstruction(out, cur.String(), start)
		cur.Reset()
	}
	return appendInstruction(out, cur.String(), start) // a continuation at the end
}

// appendInstruction appends the instruction of a joined line, if it holds one.
func appendInstruction(out []instruction, text string, line int) []instruction {
	text = strings.TrimSpace(text)
	if text == "" {
		return out
	}
	cmd, args := text, ""
	if i := strings.IndexFunc(text, unicode.IsSpace); i >= 0 {
		cmd, args = text[:i], strings.TrimSpace(text[i:])
	}
	return append(out, instruction{Cmd: strings.ToUpper(cmd), Args: args, Line: line})
}

// words splits a line into shell-like words: whitespace separates, "..." and '...'
// quote, and a backslash escapes the next character outside single quotes.
func words(s string) []string {
	var out []string
	var w strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			w.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, w.String())
	}
	return out
}

// keyValues parses the key=value words of LABEL, ENV and ARG.
func keyValues(args string) map[string]string {
	out := map[string]string{}
	for _, w := range words(args) {
		k, v, _ := strings.Cut(w, "=")
		out[k] = v
	}
	return out
}

// stages groups instructions by FROM, expanding the ARGs declared before the first FROM.
func stages(insts []instruction) ([]stage, error) {
	global := map[string]string{}
	var out []stage
	for _, in := range insts {
		if in.Cmd != "FROM" {
			if len(out) == 0 {
				if in.Cmd != "ARG" {
					return nil, fmt.Errorf("line %d: %s before the first FROM", in.Line, in.Cmd)
				}
				for k, v := range keyValues(in.Args) {
					global[k] = v
				}
				continue
			}
			out[len(out)-1].Insts = append(out[len(out)-1].Insts, in)
			continue
		}
		ws := slices.DeleteFunc(words(in.Args), func(w string) bool { return strings.HasPrefix(w, "--") })
		if len(ws) == 0 {
			return nil, fmt.Errorf("line %d: FROM without an image", in.Line)
		}
		st := stage{Base: os.Expand(ws[0], func(k string) string { return global[k] })}
		if len(ws) == 3 && strings.EqualFold(ws[1], "AS") {
			st.Name = ws[2]
		} else if len(ws) != 1 {
			return nil, fmt.Errorf("line %d: FROM %s", in.Line, in.Args)
		}
		out = append(out, st)
	}
	return out, nil
}

// all returns the arguments of every instruction cmd of a stage.
func (s stage) all(cmd string) []string {
	var out []string
	for _, in := range s.Insts {
		if in.Cmd == cmd {
			out = append(out, in.Args)
		}
	}
	return out
}

func TestDockerfile(t *testing.T) {
	src, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	insts := parseDockerfile(string(src))
	sts, err := stages(insts)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) < 2 {
		t.Fatalf("%d stages; want a build stage and a run stage", len(sts))
	}
	for _, in := range insts {
		if in.Cmd == "HEALTHCHECK" {
			t.Errorf("line %d: HEALTHCHECK; Kubernetes probes /healthz and /readyz instead", in.Line)
		}
	}
	final := sts[len(sts)-1]
	checkRunStage(t, final)
	build := buildStage(t, sts, final)
	checkBuildStage(t, build)
	settings := serveSettings(t)
	var exposed []string
	for _, e := range final.all("EXPOSE") {
		exposed = append(exposed, strings.Fields(e)...)
	}
	for _, env := range []string{"SLOGATE_LISTEN", "SLOGATE_ADMIN_LISTEN"} {
		port := strconv.Itoa(listenPort(t, settings[env].Default))
		if !slices.Contains(exposed, port) && !slices.Contains(exposed, port+"/tcp") {
			t.Errorf("EXPOSE %v lacks %s, the default of %s", exposed, port, env)
		}
	}
}

// checkRunStage checks the final stage: non-root, slogate serve, labelled.
func checkRunStage(t *testing.T, final stage) {
	users := final.all("USER")
	switch {
	case len(users) == 0 && !strings.HasSuffix(final.Base, ":nonroot"):
		t.Errorf("the run stage (FROM %s) sets no USER and its base is not a :nonroot image", final.Base)
	case len(users) > 0:
		uid, _, _ := strings.Cut(users[len(users)-1], ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("USER %s; want a numeric non-root uid (Kubernetes' runAsNonRoot can verify only a number)", users[len(users)-1])
		}
	}
	entry := final.all("ENTRYPOINT")
	var argv []string
	if len(entry) != 1 || json.Unmarshal([]byte(entry[0]), &argv) != nil || !slices.Equal(argv, []string{"/slogate", "serve"}) {
		t.Errorf("ENTRYPOINT %v; want one, in exec form: [\"/slogate\", \"serve\"]", entry)
	}
	labels := map[string]string{}
	for _, l := range final.all("LABEL") {
		for k, v := range keyValues(l) {
			labels[k] = v
		}
	}
	for _, k := range []string{"title", "description", "source", "licenses", "version"} {
		if labels["org.opencontainers.image."+k] == "" {
			t.Errorf("no label org.opencontainers.image.%s", k)
		}
	}
	args := map[string]bool{}
	for _, a := range final.all("ARG") {
		for k := range keyValues(a) {
			args[k] = true
		}
	}
	if v := labels["org.opencontainers.image.version"]; !strings.Contains(v, "${VERSION}") || !args["VERSION"] {
		t.Errorf("the version label %q should be the build argument VERSION, declared in the run stage", v)
	}
}

// buildStage returns the stage the final one copies /slogate from.
func buildStage(t *testing.T, sts []stage, final stage) stage {
	t.Helper()
	for _, c := range final.all("COPY") {
		ws := words(c)
		if len(ws) == 3 && strings.HasPrefix(ws[0], "--from=") && ws[2] == "/slogate" {
			from := strings.TrimPrefix(ws[0], "--from=")
			for _, s := range sts[:len(sts)-1] {
				if s.Name == from {
					return s
				}
			}
			t.Fatalf("COPY %s: no stage %s", c, from)
		}
	}
	t.Fatal("the run stage copies no /slogate from a build stage")
	return stage{}
}

// checkBuildStage checks that slogate is built with the Go toolchain and cgo on.
func checkBuildStage(t *testing.T, build stage) {
	if !strings.HasPrefix(build.Base, "golang:") || !strings.Contains(build.Base, "bookworm") {
		t.Errorf("the build stage is FROM %s; want golang:<version>-bookworm (glibc as in the run image)", build.Base)
	}
	cgo := ""
	for _, e := range build.all("ENV") {
		if v, ok := keyValues(e)["CGO_ENABLED"]; ok {
			cgo = v
		}
	}
	runs := strings.Join(build.all("RUN"), "\n")
	if strings.Contains(runs, "CGO_ENABLED=") {
		cgo = strings.Fields(runs[strings.Index(runs, "CGO_ENABLED=")+len("CGO_ENABLED="):])[0]
	}
	if cgo != "1" {
		t.Errorf("CGO_ENABLED is %q in the build stage; want 1 (DCGM is read through cgo)", cgo)
	}
	if !strings.Contains(runs, "go build") || !strings.Contains(runs, "./cmd/slogate") {
		t.Errorf("the build stage does not go build ./cmd/slogate")
	}
}

func TestParseDockerfile(t *testing.T) {
	src := "# syntax=docker/dockerfile:1\nARG V=1.26\nFROM --platform=$BUILDPLATFORM golang:${V} AS build\n" +
		"RUN a \\\n  # a comment inside\n  b\nLABEL k=\"a b\" j='c d' e=f\\ g\n\nFROM scratch\nENTRYPOINT [\"/x\"]\n"
	insts := parseDockerfile(src)
	if len(insts) != 6 {
		t.Fatalf("%d instructions: %+v", len(insts), insts)
	}
	if insts[2].Args != "a b" || insts[2].Line != 4 {
		t.Errorf("continued RUN = %+v", insts[2])
	}
	if kv := keyValues(insts[3].Args); kv["k"] != "a b" || kv["j"] != "c d" || kv["e"] != "f g" {
		t.Errorf("LABEL = %v", kv)
	}
	sts, err := stages(insts)
	if err != nil || len(sts) != 2 || sts[0].Base != "golang:1.26" || sts[0].Name != "build" || sts[1].Base != "scratch" {
		t.Fatalf("stages = %+v, %v", sts, err)
	}
}

func FuzzParseDockerfile(f *testing.F) {
	if src, err := os.ReadFile("../Dockerfile"); err == nil {
		f.Add(string(src))
	}
	f.Add("FROM a AS b\nRUN x \\\n")
	f.Add("LABEL a=\"b\\\" c='")
	f.Fuzz(func(t *testing.T, src string) {
		insts := parseDockerfile(src)
		for _, in := range insts {
			if in.Cmd == "" || in.Line < 1 {
				t.Fatalf("instruction %+v", in)
			}
			_ = keyValues(in.Args)
		}
		_, _ = stages(insts)
	})
}
