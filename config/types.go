package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"
)

// String returns d the way time.Duration writes it ("1m30s"), which
// UnmarshalYAML reads back.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string with a unit ("90s", "2m", "1h30m").
// A bare number is refused, so a unit is always explicit.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("must be a duration like \"90s\" or \"2m\", not %s", describe(n))
	}
	switch n.ShortTag() {
	case "!!str":
	case "!!int", "!!float":
		return errors.New(`must be a duration with a unit, like "90s" or "2m" (a bare number has no unit)`)
	default:
		return fmt.Errorf("must be a duration like \"90s\" or \"2m\", not %s", describe(n))
	}
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return fmt.Errorf("%q is not a duration; write one with a unit, like \"90s\" or \"2m\"", n.Value)
	}
	*d = Duration(v)
	return nil
}

// Units of a ByteSize.
const (
	kb  = 1000
	kib = 1024
)

// byteUnits are the units UnmarshalYAML accepts, case-sensitive.
var byteUnits = map[string]int64{
	"B":   1,
	"KB":  kb,
	"MB":  kb * kb,
	"GB":  kb * kb * kb,
	"KiB": kib,
	"MiB": kib * kib,
	"GiB": kib * kib * kib,
}

// byteUnitsHelp lists byteUnits for messages.
const byteUnitsHelp = "B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024)"

// String returns b with the largest unit that divides it exactly, binary
// units first ("4MiB", "1500KB", "123B"), which UnmarshalYAML reads back.
func (b ByteSize) String() string {
	for _, u := range []struct {
		name string
		size ByteSize
	}{
		{"GiB", kib * kib * kib}, {"MiB", kib * kib}, {"KiB", kib},
		{"GB", kb * kb * kb}, {"MB", kb * kb}, {"KB", kb},
	} {
		if b != 0 && b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// MarshalYAML writes b as a string with a unit.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// UnmarshalYAML reads an integer number of bytes, or a string of a whole
// number and a unit: B, KB, MB, GB (powers of 1000), KiB, MiB, GiB (powers of
// 1024), with or without a space ("4MiB", "512 KiB"). Units are
// case-sensitive: "mb" could mean megabits or mebibytes, so it is refused.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("must be a size like \"4MiB\" or a number of bytes, not %s", describe(n))
	}
	if n.ShortTag() == "!!int" {
		var v int64
		if err := n.Decode(&v); err != nil {
			return errors.New("is too large")
		}
		*b = ByteSize(v)
		return nil
	}
	if n.ShortTag() != "!!str" {
		return fmt.Errorf("must be a whole number of bytes or a size like \"4MiB\", not %s", describe(n))
	}
	v, err := parseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// parseByteSize parses a whole number with an optional unit.
func parseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a size; write a whole number and a unit, like \"4MiB\" or \"512 KiB\" (units: %s)", s, byteUnitsHelp)
	}
	unit := strings.TrimSpace(s[i:])
	if strings.HasPrefix(unit, ".") || strings.HasPrefix(unit, ",") {
		return 0, fmt.Errorf("%q is not a whole number; use a smaller unit, like \"1536KiB\" for 1.5MiB", s)
	}
	mult := int64(1)
	if unit != "" {
		m, ok := byteUnits[unit]
		if !ok {
			return 0, fmt.Errorf("%q has an unknown unit %q; units are case-sensitive: %s", s, unit, byteUnitsHelp)
		}
		mult = m
	}
	v, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || v > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return ByteSize(v * mult), nil
}

// describe names what n is, for messages: "a list", "a string" and so on.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return "a string"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "true or false"
		case "!!null":
			return "empty"
		}
		return "a " + n.ShortTag() + " value"
	case yaml.AliasNode:
		if n.Alias != nil {
			return describe(n.Alias)
		}
	}
	return "something else"
}
