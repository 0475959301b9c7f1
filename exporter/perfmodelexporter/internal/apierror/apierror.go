// Package apierror carries an HTTP status with an error from the packages
// behind the perfmodel API to its HTTP layer, which answers with the status
// and the message.
package apierror // import "github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is answered with Code and Msg.
type Error struct {
	Code int
	Msg  string
}

func (e Error) Error() string { return e.Msg }

// New is an error answered with code.
func New(code int, format string, args ...any) error {
	return Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Badf is an error answered with 400 Bad Request.
func Badf(format string, args ...any) error {
	return Error{Code: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

// Status is err's code and message when it carries one.
func Status(err error) (Error, bool) {
	var e Error
	ok := errors.As(err, &e)
	return e, ok
}
