package leaseapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// StatusError is a request the injector refused, with its HTTP status.
type StatusError struct {
	Code int
	Msg  string
}

func (e StatusError) Error() string { return fmt.Sprintf("injector: %d %s", e.Code, e.Msg) }

// IsNotFound reports whether err is the injector's 404 (no such lease).
func IsNotFound(err error) bool {
	var se StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// Client calls one injector's lease API.
type Client struct {
	base    string
	token   string
	hc      *http.Client
	retries int
}

// NewClient is a client of the injector at base (e.g. https://host:8787),
// sending token as a bearer token when not empty. It tries each request up
// to three times.
func NewClient(base, token string, hc *http.Client) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, hc: hc, retries: 3}
}

// Create asks for a lease.
func (c *Client) Create(ctx context.Context, req Request) (Created, error) {
	var out Created
	err := c.Do(ctx, http.MethodPost, PathLeases, req, &out)
	return out, err
}

// Get reads a lease's status.
func (c *Client) Get(ctx context.Context, id string) (Status[*Stats], error) {
	var out Status[*Stats]
	err := c.Do(ctx, http.MethodGet, PathLeases+"/"+id, nil, &out)
	return out, err
}

// Stop ends a lease and returns its final status.
func (c *Client) Stop(ctx context.Context, id string) (Status[*Stats], error) {
	var out Status[*Stats]
	err := c.Do(ctx, http.MethodDelete, PathLeases+"/"+id, nil, &out)
	return out, err
}

// statusError carries the injector's own message: the "error" field of its
// JSON answer, else the body as it came.
func statusError(code int, body []byte) StatusError {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return StatusError{code, e.Error}
	}
	return StatusError{code, strings.TrimSpace(string(body))}
}

// Do sends one request with body in (nil for none) and decodes the answer
// into out (nil to discard it), retrying transport errors, 429 and 5xx a
// bounded number of times. A retried POST whose first attempt did reach the
// injector is refused as a conflict; the orphan lease expires by itself.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	var last error
	for attempt := 0; attempt < c.retries; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(last, ctx.Err())
			case <-time.After(time.Duration(attempt) * 250 * time.Millisecond):
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		if in != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		switch {
		case err != nil:
			last = err
			continue
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			last = statusError(resp.StatusCode, b)
			continue
		case resp.StatusCode >= 300:
			return statusError(resp.StatusCode, b)
		}
		if out != nil {
			return json.Unmarshal(b, out)
		}
		return nil
	}
	return last
}
