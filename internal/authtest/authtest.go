// Package authtest is what the components' tests need to run their HTTP APIs
// behind an authenticator: a server authenticator extension that accepts one
// bearer token, and a host that offers it.
package authtest

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensionauth"
)

// Header is the Authorization header Token accepts.
const Header = "Bearer s3cret"

// Token is a server authenticator extension accepting only Header.
type Token struct {
	component.StartFunc
	component.ShutdownFunc
}

// Authenticate accepts a request whose Authorization header is Header.
func (Token) Authenticate(ctx context.Context, h map[string][]string) (context.Context, error) {
	for _, v := range h["Authorization"] {
		if v == Header {
			return ctx, nil
		}
	}
	return ctx, fmt.Errorf("missing or bad bearer token")
}

var _ extensionauth.Server = Token{}

// Host offers the given extensions.
type Host map[component.ID]component.Component

// GetExtensions returns the host's extensions.
func (h Host) GetExtensions() map[component.ID]component.Component { return h }
