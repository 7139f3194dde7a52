// Package layout holds no code: its test checks the dependency rules of
// docs/architecture.md against the imports of every package in the module.
package layout
