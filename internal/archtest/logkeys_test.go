package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// synonyms are log attribute keys that name something STYLE.md gives a
// fixed key for (server, session_id, method, tool, principal, err), with
// that key: one name per thing, so that a query over the JSON logs finds
// every line.
var synonyms = map[string]string{
	"error": "err", "errors": "err",
	"session": "session_id", "sessionID": "session_id", "sessionId": "session_id", "sid": "session_id", "session_key": "session_id",
	"server_name": "server", "serverName": "server", "upstream": "server", "upstream_name": "server",
	"tool_name": "tool", "toolName": "tool",
	"rpc_method": "method", "jsonrpc_method": "method",
	"user": "principal", "principal_name": "principal", "caller": "principal",
}

// logMethods are the slog methods whose first argument is the message;
// their keys follow at odd positions. With takes keys at even positions.
var logMethods = map[string]bool{"Debug": true, "Info": true, "Warn": true, "Error": true}

// TestLogKeys fails on a log call with a synonym of a fixed key, or with a
// message that is not a constant lowercase string (STYLE.md, Logging: data
// goes in attributes, never into the message).
func TestLogKeys(t *testing.T) {
	walkSources(t, func(root, path string) error {
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.ToSlash(rel), src, 0)
		if err != nil {
			return err
		}
		if !importsSlog(f) {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !isLogger(sel.X) {
				return true
			}
			first := 0
			switch {
			case logMethods[sel.Sel.Name]:
				if len(call.Args) == 0 {
					return true
				}
				checkMessage(t, fset, call.Args[0])
				first = 1
			case sel.Sel.Name == "With":
			default:
				return true
			}
			for i := first; i < len(call.Args); i += 2 {
				lit, ok := call.Args[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue // a slog.Attr, or a key that is not a literal
				}
				key, _ := strconv.Unquote(lit.Value)
				if want, bad := synonyms[key]; bad {
					t.Errorf("%s: log key %q: use %q (STYLE.md, Logging)", fset.Position(lit.Pos()), key, want)
				}
			}
			return true
		})
		return nil
	})
}

// importsSlog reports whether f imports log/slog (only then are its
// logger calls slog's).
func importsSlog(f *ast.File) bool {
	for _, imp := range f.Imports {
		if imp.Path.Value == `"log/slog"` {
			return true
		}
	}
	return false
}

// isLogger reports whether x looks like a logger: an identifier or field
// named logger or log, or slog itself.
func isLogger(x ast.Expr) bool {
	var name string
	switch x := x.(type) {
	case *ast.Ident:
		name = x.Name
	case *ast.SelectorExpr:
		name = x.Sel.Name
	case *ast.CallExpr: // logger.With(...).Info(...)
		if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "With" {
			return isLogger(sel.X)
		}
	}
	return name == "slog" || strings.EqualFold(name, "logger") || name == "log"
}

// checkMessage fails on a message that is not a string literal starting
// with a lowercase letter.
func checkMessage(t *testing.T, fset *token.FileSet, arg ast.Expr) {
	t.Helper()
	lit, ok := arg.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		t.Errorf("%s: log message is not a constant string: put the data in attributes (STYLE.md, Logging)", fset.Position(arg.Pos()))
		return
	}
	msg, _ := strconv.Unquote(lit.Value)
	if r := []rune(msg); len(r) > 0 && unicode.IsUpper(r[0]) && !isInitialism(msg) {
		t.Errorf("%s: log message %q starts with a capital letter: messages are lowercase (STYLE.md, Logging)", fset.Position(lit.Pos()), msg)
	}
}

// isInitialism reports whether msg starts with an all-caps word, such as
// "HTTP server stopped", which keeps its case.
func isInitialism(msg string) bool {
	word, _, _ := strings.Cut(msg, " ")
	return len(word) > 1 && strings.ToUpper(word) == word
}
