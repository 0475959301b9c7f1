//go:build !linux

// Package nsenter runs a function inside another network namespace (Linux).
package nsenter

import "errors"

// Do runs fn; a namespace path is an error outside Linux.
func Do(path string, fn func() error) error {
	if path != "" {
		return errors.New("nsenter: network namespaces need Linux")
	}
	return fn()
}
