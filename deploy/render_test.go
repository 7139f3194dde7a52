package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// This file renders a kustomization the way `kubectl kustomize` does, for the subset the
// manifests use: `resources` (files and directories) and `patches` given by path, each a
// strategic-merge patch of an object named by its own kind and name. The patch semantics
// are apimachinery's (merge keys from the k8s.io/api types), as in kustomize. Anything
// else in a kustomization.yaml fails the test rather than being ignored. Where kubectl is
// installed, TestRenderMatchesKubectl checks that both renderings agree.

// object is one manifest in its generic JSON form.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }

func (o object) name() string {
	md, _ := o["metadata"].(map[string]any)
	s, _ := md["name"].(string)
	return s
}

func (o object) id() string { return o.kind() + "/" + o.name() }

// kustomization is the part of kustomization.yaml the renderer understands; it is decoded
// strictly, so any other field is an error.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Patches    []struct {
		Path string `json:"path"`
	} `json:"patches"`
}

// patchSchemas are the types whose strategic-merge patches the renderer can apply.
var patchSchemas = map[string]any{
	"Deployment": appsv1.Deployment{},
	"Service":    corev1.Service{},
	"ConfigMap":  corev1.ConfigMap{},
	"CronJob":    batchv1.CronJob{},
}

// render returns the objects the kustomization in dir builds, in resource order.
func render(dir string) ([]object, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w (keep to resources and patches: the test renders them itself)", dir, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		return nil, fmt.Errorf("%s/kustomization.yaml: apiVersion %q kind %q, want a kustomize.config.k8s.io/v1beta1 Kustomization", dir, k.APIVersion, k.Kind)
	}
	var objs []object
	for _, r := range k.Resources {
		path := filepath.Join(dir, r)
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		var more []object
		if fi.IsDir() {
			more, err = render(path)
		} else {
			more, err = readObjects(path)
		}
		if err != nil {
			return nil, err
		}
		objs = append(objs, more...)
	}
	for _, p := range k.Patches {
		if err := applyPatches(objs, filepath.Join(dir, p.Path)); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, o := range objs {
		if seen[o.id()] {
			return nil, fmt.Errorf("%s: %s twice", dir, o.id())
		}
		seen[o.id()] = true
	}
	return objs, nil
}

// applyPatches applies every document of the patch file at path to the object of the
// same kind and name in objs.
func applyPatches(objs []object, path string) error {
	patches, err := readObjects(path)
	if err != nil {
		return err
	}
	for _, p := range patches {
		schema, ok := patchSchemas[p.kind()]
		if !ok {
			return fmt.Errorf("%s: the test cannot patch a %s", path, p.kind())
		}
		i := slicesIndex(objs, p.id())
		if i < 0 {
			return fmt.Errorf("%s: no %s to patch", path, p.id())
		}
		orig, err := json.Marshal(objs[i])
		if err != nil {
			return err
		}
		patch, err := json.Marshal(p)
		if err != nil {
			return err
		}
		merged, err := strategicpatch.StrategicMergePatch(orig, patch, schema)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		var o object
		if err := json.Unmarshal(merged, &o); err != nil {
			return err
		}
		objs[i] = o
	}
	return nil
}

func slicesIndex(objs []object, id string) int {
	for i, o := range objs {
		if o.id() == id {
			return i
		}
	}
	return -1
}

// readObjects reads the YAML documents of a file.
func readObjects(path string) ([]object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := parseObjects(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// parseObjects splits a YAML stream into its documents; duplicate keys are errors and
// documents that hold only comments are skipped.
func parseObjects(data []byte) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, err
		}
		if string(j) == "null" {
			continue
		}
		var o object
		if err := json.Unmarshal(j, &o); err != nil {
			return nil, fmt.Errorf("a document that is not an object: %w", err)
		}
		objs = append(objs, o)
	}
}

// kubectlRender returns what `kubectl kustomize dir` builds, or ok false without kubectl.
func kubectlRender(t *testing.T, dir string) (objs []object, ok bool) {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		return nil, false
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	objs, err = parseObjects(out)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return objs, true
}

// normalized returns v with every list of named objects (containers, env, ports, volumes,
// mounts) sorted by name: kustomize and apimachinery order merged lists differently, and
// the order of these lists carries no meaning except for env, whose $(VAR) references
// checkEnvReferences checks on each rendering separately.
func normalized(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalized(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalized(e)
		}
		if names, ok := elementNames(out); ok {
			order := make([]int, len(out))
			for i := range order {
				order[i] = i
			}
			sort.SliceStable(order, func(i, j int) bool { return names[order[i]] < names[order[j]] })
			sorted := make([]any, len(out))
			for i, j := range order {
				sorted[i] = out[j]
			}
			return sorted
		}
		return out
	}
	return v
}

// elementNames returns the names of a list's elements if all are objects with a name.
func elementNames(list []any) ([]string, bool) {
	names := make([]string, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		if names[i], ok = m["name"].(string); !ok {
			return nil, false
		}
	}
	return names, len(list) > 0
}

// diffObjects describes how two renderings differ, or returns "".
func diffObjects(got, want []object) string {
	index := func(objs []object) map[string]any {
		m := map[string]any{}
		for _, o := range objs {
			m[o.id()] = normalized(map[string]any(o))
		}
		return m
	}
	g, w := index(got), index(want)
	var diffs []string
	for id, wo := range w {
		if gv, ok := g[id]; !ok {
			diffs = append(diffs, "missing "+id)
		} else if !reflect.DeepEqual(gv, wo) {
			gj, _ := json.MarshalIndent(gv, "", " ")
			wj, _ := json.MarshalIndent(wo, "", " ")
			diffs = append(diffs, fmt.Sprintf("%s differs:\n--- test's rendering\n%s\n--- kubectl's\n%s", id, gj, wj))
		}
	}
	for id := range g {
		if _, ok := w[id]; !ok {
			diffs = append(diffs, "extra "+id)
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "\n")
}

// kustomizations are the directories under deploy/ that build, with what each must hold.
var kustomizations = []struct {
	dir    string
	engine string // SLOGATE_ENGINE of the pod; "" for the rules or an autoscaler alone
	gpu    bool   // the engine asks for a GPU
}{
	{dir: ".", engine: ""},
	{dir: "base", engine: "vllm"},
	{dir: "overlays/vllm", engine: "vllm", gpu: true},
	{dir: "overlays/sglang", engine: "sglang", gpu: true},
	{dir: "autoscaling/keda", engine: ""},
	{dir: "autoscaling/hpa", engine: ""},
}

func TestRenderMatchesKubectl(t *testing.T) {
	for _, k := range kustomizations {
		t.Run(k.dir, func(t *testing.T) {
			ours, err := render(k.dir)
			if err != nil {
				t.Fatal(err)
			}
			theirs, ok := kubectlRender(t, k.dir)
			if !ok {
				t.Skip("kubectl is not installed; the manifests are checked on the test's own rendering")
			}
			if d := diffObjects(ours, theirs); d != "" {
				t.Errorf("the test's rendering of %s differs from kubectl kustomize:\n%s", k.dir, d)
			}
		})
	}
}

func TestRenderRefusesUnknownFields(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
	for name, k := range map[string]string{
		"images":        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [cm.yaml]\nimages: [{name: x, newTag: y}]\n",
		"namePrefix":    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [cm.yaml]\nnamePrefix: x-\n",
		"component":     "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [cm.yaml]\n",
		"duplicate key": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [cm.yaml]\nresources: [cm.yaml]\n",
		"twice":         "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [cm.yaml, cm.yaml]\n",
	} {
		t.Run(name, func(t *testing.T) {
			write("kustomization.yaml", k)
			if _, err := render(dir); err == nil {
				t.Fatal("rendered; want an error")
			}
		})
	}
}
