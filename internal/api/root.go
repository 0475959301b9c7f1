package api

import "strings"

// VersionPrefix begins every path of the HTTP API (PathHealth and the others).
const VersionPrefix = "/api/v1"

// Root is the path under which the API's VersionPrefix lives, given the path of
// a URL an operator entered: trailing slashes and a trailing /api/v1 are
// removed, so that http://host:8790, http://host:8790/api/v1/ and a reverse
// proxy's http://proxy/tierscope/api/v1 all reach the same endpoints.
func Root(path string) string {
	path = strings.TrimRight(path, "/")
	path = strings.TrimSuffix(path, VersionPrefix)
	return strings.TrimRight(path, "/")
}
