// Package openapi holds the OpenAPI 3.1 document of mcpgw's admin API,
// embedded in the binary and served at /admin/openapi.json.
//
// It exists apart from the handlers (gateway/admin) so that the document is
// one reviewed file that clients and tests read: the admin tests load it and
// check every request and response against it, and fail when a route is
// missing from it or a documented route does not exist. A later issue adds
// OpenAPI documents as a source of tools here.
package openapi

import _ "embed"

//go:embed admin.json
var admin []byte

// Admin returns the admin API's OpenAPI 3.1 document (JSON). The caller must
// not modify it.
func Admin() []byte { return admin }
