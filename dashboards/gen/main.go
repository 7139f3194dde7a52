// Command gen writes the JSON of every slogate dashboard to a directory (go generate
// runs it in dashboards/ with -out json). Files it writes are replaced whole; other
// files in the directory are left alone.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/slogate/slogate/dashboards"
)

func main() {
	out := flag.String("out", "json", "directory to write the dashboards' JSON to")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// run renders every dashboard and writes it to dir.
func run(dir string) error {
	files, err := dashboards.Render()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
