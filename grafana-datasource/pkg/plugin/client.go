package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"

	"github.com/tierscope/tierscope/internal/api"
)

// maxResponseBytes bounds what one API answer may occupy in memory; the API's
// documents are bounded by its configuration, so more than this means a wrong URL.
const maxResponseBytes = 64 << 20

// APIClient talks to the perfmodel exporter's HTTP API.
type APIClient struct {
	baseURL *url.URL
	token   string
	http    *http.Client
}

// APIError is a failed API call with a message an operator can act on.
type APIError struct {
	// Status is the HTTP status, 0 when the API could not be reached.
	Status  int
	Message string
}

func (e *APIError) Error() string { return e.Message }

// errorSource tells Grafana whether the plugin or what it talks to failed.
func (e *APIError) errorSource() backend.ErrorSource {
	if e.Status == 0 {
		return backend.ErrorSourceDownstream
	}
	return backend.ErrorSourceFromHTTPStatus(e.Status)
}

// NewAPIClient checks the base URL and returns a client for it. The token is
// sent as a bearer token when it is not empty.
func NewAPIClient(baseURL, token string, timeout time.Duration) (*APIClient, error) {
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	return newAPIClient(baseURL, token, &http.Client{Timeout: timeout})
}

// defaultTimeout bounds an API call when the settings give none.
const defaultTimeout = 30 * time.Second

// newAPIClient is NewAPIClient over a given HTTP client (Grafana's, with the
// datasource's TLS, CA, headers and proxy settings).
func newAPIClient(baseURL, token string, httpClient *http.Client) (*APIClient, error) {
	baseURL = strings.TrimSpace(baseURL)
	if baseURL == "" {
		return nil, errors.New("the Tierscope API URL is not set: enter it in the datasource settings, e.g. http://localhost:8790")
	}
	parsed, err := url.Parse(baseURL)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return nil, fmt.Errorf("the Tierscope API URL %q is not an http(s) URL", baseURL)
	}
	parsed.Path = api.Root(parsed.Path)
	parsed.RawPath = ""
	return &APIClient{baseURL: parsed, token: token, http: httpClient}, nil
}

// get fetches path with query parameters and decodes the JSON answer into out.
func (c *APIClient) get(ctx context.Context, path string, params url.Values, out any) error {
	return c.do(ctx, http.MethodGet, path, params, nil, out)
}

// post sends body as JSON to path and decodes the JSON answer into out.
func (c *APIClient) post(ctx context.Context, path string, body, out any) error {
	return c.do(ctx, http.MethodPost, path, nil, body, out)
}

func (c *APIClient) do(ctx context.Context, method, path string, params url.Values, body, out any) error {
	target := *c.baseURL
	target.Path += path
	target.RawQuery = params.Encode()

	var payload io.Reader
	if body != nil {
		encoded, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding the request to %s: %w", path, err)
		}
		payload = bytes.NewReader(encoded)
	}
	req, err := http.NewRequestWithContext(ctx, method, target.String(), payload)
	if err != nil {
		return &APIError{Message: fmt.Sprintf("building the request to %s: %v", path, err)}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}

	resp, err := c.http.Do(req)
	if err != nil {
		return &APIError{Message: unreachableMessage(c.baseURL.String(), err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return &APIError{Status: resp.StatusCode, Message: fmt.Sprintf("reading the answer of %s: %v", path, err)}
	}
	if len(raw) > maxResponseBytes {
		return &APIError{Status: resp.StatusCode, Message: fmt.Sprintf("the answer of %s is larger than %d MiB", path, maxResponseBytes>>20)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &APIError{Status: resp.StatusCode, Message: statusMessage(path, resp.StatusCode, raw)}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &APIError{Status: resp.StatusCode, Message: fmt.Sprintf("the answer of %s is not the expected JSON (%v); is the URL that of the Tierscope perfmodel exporter?", path, err)}
	}
	return nil
}

func unreachableMessage(base string, err error) string {
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "the request to the Tierscope API was cancelled"
	case errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("the Tierscope API at %s did not answer in time", base)
	default:
		return fmt.Sprintf("the Tierscope API at %s cannot be reached: %v", base, err)
	}
}

// statusMessage turns a failed answer into a sentence, using the API's
// ErrorResponse when the body is one.
func statusMessage(path string, status int, body []byte) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication failed (HTTP 401): the Tierscope API needs a valid API token; set it in the datasource settings"
	case http.StatusForbidden:
		return "access denied (HTTP 403): the API token is not allowed to read " + path
	}
	var apiErr api.ErrorResponse
	detail := ""
	if json.Unmarshal(body, &apiErr) == nil && apiErr.Error != "" {
		detail = apiErr.Error
	} else if text := strings.TrimSpace(string(body)); text != "" && len(text) <= 200 {
		detail = text
	}
	msg := fmt.Sprintf("the Tierscope API answered %d %s for %s", status, http.StatusText(status), path)
	if detail != "" {
		msg += ": " + detail
	}
	return msg
}
