package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// File is one generated file, named relative to the repository root.
type File struct {
	Name string
	Data []byte
}

// Files renders the deploy files from Idemgate and Local.
func Files() ([]File, error) { return Render(Idemgate(), Local()) }

// Render renders s.yaml and template.yml from cloud and s.local.yaml from
// local. Every input cloud declares must be used by one of its files, and
// every input they use must be declared (so that it is documented).
func Render(cloud, local Stack) ([]File, error) {
	s, sUsed, errS := sdevsFile(cloud)
	ros, rosUsed, errR := rosFile(cloud)
	loc, locUsed, errL := sdevsFile(local)
	errs := []error{wrapErr("s.yaml", errS), wrapErr("template.yml", errR), wrapErr("s.local.yaml", errL)}
	for _, in := range append(sUsed, rosUsed...) {
		if !contains(cloud.Inputs, in) {
			errs = append(errs, fmt.Errorf("input %s%s is used but not listed in Stack.Inputs", in.Env, in.Param))
		}
	}
	for _, in := range cloud.Inputs {
		if !contains(sUsed, in) && !contains(rosUsed, in) {
			errs = append(errs, fmt.Errorf("input %s%s is listed but neither file uses it", in.Env, in.Param))
		}
	}
	if len(locUsed) > 0 {
		errs = append(errs, fmt.Errorf("s.local.yaml reads %d inputs: a local run must need no exports", len(locUsed)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return []File{{"s.yaml", s}, {"template.yml", ros}, {"s.local.yaml", loc}}, nil
}

func wrapErr(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

// Write writes the files under root.
func Write(root string, files []File) error {
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(root, f.Name), f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
