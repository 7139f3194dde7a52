package settings

import (
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// fieldValue is a flag.Value that parses into one settings field with the same rules
// the environment parser applies. A secret's value is never shown: the flag set keeps
// String() as the flag's default, which would otherwise hold the environment's value.
type fieldValue struct {
	v      reflect.Value
	secret bool
}

var durationType = reflect.TypeFor[time.Duration]()

func (f fieldValue) String() string {
	if !f.v.IsValid() || f.secret {
		return ""
	}
	return fmt.Sprint(f.v.Interface())
}

func (f fieldValue) IsBoolFlag() bool { return f.v.IsValid() && f.v.Kind() == reflect.Bool }

func (f fieldValue) Set(s string) error {
	switch {
	case f.v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		f.v.SetInt(int64(d))
	case f.v.Kind() == reflect.String:
		f.v.SetString(s)
	case f.v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		f.v.SetBool(b)
	case f.v.CanInt():
		// As caarlos0/env parses the variable: decimal only, and an int in 32 bits, so
		// that a flag and its variable accept the same values.
		bits := f.v.Type().Bits()
		if f.v.Kind() == reflect.Int {
			bits = 32
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return err
		}
		f.v.SetInt(n)
	case f.v.CanFloat():
		x, err := strconv.ParseFloat(s, f.v.Type().Bits())
		if err != nil {
			return err
		}
		f.v.SetFloat(x)
	default:
		return fmt.Errorf("unsupported setting type %s", f.v.Type())
	}
	return nil
}
