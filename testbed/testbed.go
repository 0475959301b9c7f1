// Package testbed holds the testbed's default configuration; the tiers, the load
// generator and the namespace harness live in its subpackages (README.md).
package testbed

import _ "embed"

// DefaultYAML is testbed.yaml, embedded here because go:embed cannot reach a parent
// directory and the file belongs next to the README that documents it.
//
//go:embed testbed.yaml
var DefaultYAML []byte

// StitchYAML is stitch.yaml, the opt-in configuration for span-stitching
// evaluation (config.Stitch).
//
//go:embed stitch.yaml
var StitchYAML []byte
