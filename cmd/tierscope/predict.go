package main

import (
	"errors"
	"io"
)

// runPredict is being written; this placeholder keeps the command table compiling.
func runPredict(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return errors.New("predict: not yet implemented")
}
