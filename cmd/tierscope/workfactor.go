package main

import (
	"errors"
	"io"
)

// runWorkfactor is being written; this placeholder keeps the command table compiling.
func runWorkfactor(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return errors.New("workfactor: not yet implemented")
}
