package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tierscope/tierscope/internal/api"
)

// experimentUsage is the synopsis of `tierscope experiment`.
const experimentUsage = `experiment start --element link:app->db [--element ...] [--wait] [--api URL]
       tierscope experiment status [ID] [--api URL]
       tierscope experiment abort ID [--api URL]`

// runExperiment is the operators' client of the perfmodel exporter's gradient
// experiments (POST, GET and DELETE /api/v1/experiments), so that starting,
// following and aborting an experiment needs no curl.
func runExperiment(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintf(stderr, "usage: tierscope %s\n", experimentUsage)
			return errHelp
		}
		return usagef("experiment needs a subcommand: start, status or abort")
	}
	sub, args := args[0], args[1:]
	if sub != "start" && sub != "status" && sub != "abort" {
		return usagef("unknown experiment subcommand %q (start, status, abort)", sub)
	}
	fs := newFlagSet("experiment "+sub, experimentUsage, stderr)
	var (
		apiURL    = fs.String("api", "http://127.0.0.1:8790", "the perfmodel exporter's API, with or without /api/v1")
		tokenFile = fs.String("token-file", "", "file holding the API's bearer token (default: $TIERSCOPE_TOKEN)")
		format    = fs.String("format", "text", "output: text (one line per experiment) or json (the API's document)")
		timeout   = fs.Duration("timeout", 10*time.Second, "bound of each API call")
		elements  stringList
		injector  = fs.String("injector", "", "start: the injector's URL (default: the exporter's experiments.injector)")
		k         = fs.Int("k", 0, "start: minimum requests per bin (0: the exporter's default)")
		n         = fs.Int("n", 0, "start: bins per measurement, a power of two (0: the exporter's default)")
		scale     = fs.Float64("scale", 0, "start: delay scale factor d (0: the exporter's default)")
		maxP99    = fs.Float64("max-p99-ms", 0, "start: abort when the front tier's p99 exceeds this, in ms (0: no guard)")
		wait      = fs.Bool("wait", false, "start, status: follow the experiment until it ends, printing its progress; exit 1 unless it is done")
		poll      = fs.Duration("poll", 5*time.Second, "with --wait: time between two looks at the experiment")
	)
	fs.Var(&elements, "element", "start: link:<caller>-><callee>, frequency:<machine> or capacity:<machine>; repeat to measure several after one training")
	id, rest := splitPositional(fs, args)
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return usagef("--format must be text or json, not %q", *format)
	}
	c, err := apiClient(*apiURL, *tokenFile, *timeout)
	if err != nil {
		return err
	}
	show := func(x api.Experiment) error { return printExperiment(stdout, *format, x) }

	switch sub {
	case "start":
		if id != "" {
			return usagef("experiment start takes no id (got %q); name what to measure with --element", id)
		}
		if len(elements) == 0 {
			return usagef("experiment start needs --element, e.g. --element 'link:app->db'")
		}
		req := api.ExperimentRequest{Injector: *injector, K: *k, N: *n, Scale: *scale, MaxP99Ms: *maxP99}
		if len(elements) == 1 {
			req.Element = elements[0]
		} else {
			req.Elements = elements
		}
		var x api.Experiment
		if err := c.call(http.MethodPost, api.PathExperiments, req, &x); err != nil {
			return err
		}
		if err := show(x); err != nil {
			return err
		}
		if *wait {
			return c.follow(x.ID, *poll, show)
		}
		return nil
	case "status":
		return experimentStatus(c, id, *wait, *poll, *format, stdout, show)
	default: // abort
		if id == "" {
			return usagef("experiment abort needs an experiment id: tierscope experiment abort ID")
		}
		var x api.Experiment
		if err := c.call(http.MethodDelete, api.PathExperiments+"/"+url.PathEscape(id), nil, &x); err != nil {
			return err
		}
		return show(x)
	}
}

// experimentStatus shows experiment id (following it with wait), or every
// experiment when id is "".
func experimentStatus(c *experimentClient, id string, wait bool, poll time.Duration, format string, stdout io.Writer, show func(api.Experiment) error) error {
	if id == "" {
		if wait {
			return usagef("experiment status --wait needs an experiment id")
		}
		var list api.Experiments
		if err := c.call(http.MethodGet, api.PathExperiments, nil, &list); err != nil {
			return err
		}
		if format == "json" {
			return writeJSONLine(stdout, list)
		}
		if len(list.Experiments) == 0 {
			_, err := fmt.Fprintln(stdout, "no experiments yet; start one with: tierscope experiment start --element 'link:<caller>-><callee>'")
			return err
		}
		for _, x := range list.Experiments {
			if err := show(x); err != nil {
				return err
			}
		}
		return nil
	}
	if wait {
		return c.follow(id, poll, show)
	}
	var x api.Experiment
	if err := c.call(http.MethodGet, api.PathExperiments+"/"+url.PathEscape(id), nil, &x); err != nil {
		return err
	}
	return show(x)
}

// splitPositional takes the experiment id, the first argument that is neither
// a flag nor the value of a non-boolean flag, out of args.
func splitPositional(fs *flag.FlagSet, args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") {
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if f := fs.Lookup(name); f != nil {
				if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
					i++ // the flag's value
				}
			}
			continue
		}
		return a, append(append([]string{}, args[:i]...), args[i+1:]...)
	}
	return "", args
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("empty value")
	}
	*l = append(*l, strings.TrimSpace(v))
	return nil
}

var _ flag.Value = (*stringList)(nil)

// experimentEnded is true for the phases an experiment never leaves.
func experimentEnded(phase string) bool {
	return phase == "done" || phase == "aborted" || phase == "failed"
}

func printExperiment(w io.Writer, format string, x api.Experiment) error {
	if format == "json" {
		return writeJSONLine(w, x)
	}
	element := x.Element
	if x.CurrentElement != "" && x.CurrentElement != x.Element {
		element += " (now " + x.CurrentElement + ")"
	}
	line := fmt.Sprintf("%s  %s  %s  %.0f%%", x.ID, element, x.Phase, x.Percent)
	if !experimentEnded(x.Phase) && x.ETASeconds > 0 {
		line += fmt.Sprintf("  ETA %s", (time.Duration(x.ETASeconds) * time.Second).Round(time.Second))
	}
	if x.Reason != "" {
		line += "  reason: " + x.Reason
	}
	if _, err := fmt.Fprintln(w, line); err != nil {
		return err
	}
	for _, g := range x.Gradients {
		if _, err := fmt.Fprintf(w, "  d(%s)/d(%s) = %.4g  95%% [%.4g, %.4g]  SNR %.1f\n",
			g.Transaction, g.Element, g.Gradient, g.CI95[0], g.CI95[1], g.SNR); err != nil {
			return err
		}
	}
	return nil
}

func writeJSONLine(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

type experimentClient struct {
	base    *url.URL
	token   string
	timeout time.Duration
	http    *http.Client
}

// apiClient is a client of the perfmodel API at apiURL, with the bearer token
// read from tokenFile, else from $TIERSCOPE_TOKEN.
func apiClient(apiURL, tokenFile string, timeout time.Duration) (*experimentClient, error) {
	token := os.Getenv("TIERSCOPE_TOKEN")
	if tokenFile != "" {
		data, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, err
		}
		token = strings.TrimSpace(string(data))
	}
	c, err := newExperimentClient(apiURL, token, timeout)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	return c, nil
}

func newExperimentClient(raw, token string, timeout time.Duration) (*experimentClient, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--api must be an http(s) URL such as http://127.0.0.1:8790, not %q", raw)
	}
	u.Path, u.RawPath = api.Root(u.Path), ""
	return &experimentClient{base: u, token: token, timeout: timeout,
		http: &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}}, nil
}

// call sends one request and decodes the answer into out; an error status
// becomes an error carrying the API's message.
func (c *experimentClient) call(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	target := *c.base
	p, query, _ := strings.Cut(path, "?")
	target.Path += p
	target.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, target.String(), rd)
	if err != nil {
		return usageError{err.Error()}
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
		return fmt.Errorf("the perfmodel API at %s cannot be reached: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e api.ErrorResponse
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if resp.StatusCode == http.StatusUnauthorized {
			msg += " (set $TIERSCOPE_TOKEN or --token-file)"
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the expected JSON (%v); is --api the perfmodel exporter?", method, path, err)
	}
	return nil
}

// follow prints the experiment each time its phase or progress changes until
// it ends; an experiment that ends other than done is an error.
func (c *experimentClient) follow(id string, poll time.Duration, show func(api.Experiment) error) error {
	last := ""
	for {
		var x api.Experiment
		if err := c.call(http.MethodGet, api.PathExperiments+"/"+url.PathEscape(id), nil, &x); err != nil {
			return err
		}
		if seen := fmt.Sprintf("%s %.0f %s", x.Phase, x.Percent, x.CurrentElement); seen != last || experimentEnded(x.Phase) {
			last = seen
			if err := show(x); err != nil {
				return err
			}
		}
		if experimentEnded(x.Phase) {
			if x.Phase != "done" {
				return fmt.Errorf("experiment %s ended %s: %s", id, x.Phase, x.Reason)
			}
			return nil
		}
		time.Sleep(poll)
	}
}
