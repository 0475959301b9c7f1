package main

import (
	"errors"
	"io"
)

// runGradient is being written; this placeholder keeps the command table compiling.
func runGradient(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return errors.New("gradient: not yet implemented")
}
