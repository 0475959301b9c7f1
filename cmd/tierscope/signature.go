package main

import (
	"errors"
	"io"
)

// runSignature is being written; this placeholder keeps the command table compiling.
func runSignature(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return errors.New("signature: not yet implemented")
}
