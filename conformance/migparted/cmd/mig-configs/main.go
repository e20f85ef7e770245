// Command mig-configs reads mig-parted config files with mig-parted's own parser (api/spec/v1, the
// `version: v1` / `mig-configs` spec that `nvidia-mig-parted apply --config-file` unmarshals with
// sigs.k8s.io/yaml) and prints, as JSON, every config's entries and, for each GPU PCI device ID given, the
// entries mig-parted walks for GPU 0 of that ID (MigConfigSpec.MatchesDeviceFilter and MatchesDevices, as
// WalkSelectedMigConfigForEachGPU filters them). A GPU Operator ConfigMap (`kind: ConfigMap`) is read from
// its data["config.yaml"]. Each config is also parsed on its own, so that a profile name the pinned parser
// rejects fails that config alone (its "error"); "specError" is the whole file's verdict.
//
//	mig-configs -device-ids 0x20B010DE,0x233010DE FILE...
//
// Test equipment for conformance/tests/test_mig_tables.py; kgpu never runs it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	v1 "github.com/NVIDIA/mig-parted/api/spec/v1"
	"github.com/NVIDIA/mig-parted/pkg/types"
	"sigs.k8s.io/yaml"
)

type entry struct {
	DeviceFilter []string       `json:"deviceFilter"`
	Devices      interface{}    `json:"devices"`
	MigEnabled   bool           `json:"migEnabled"`
	MigDevices   map[string]int `json:"migDevices"`
}

type config struct {
	Error   string  `json:"error,omitempty"`
	Entries []entry `json:"entries"`
	// device ID -> indices of the entries mig-parted applies to GPU 0 of that ID, in order
	PerDevice map[string][]int `json:"perDevice"`
}

type file struct {
	Path      string            `json:"path"`
	Parser    string            `json:"parser"`
	SpecError string            `json:"specError,omitempty"`
	Configs   map[string]config `json:"configs"`
}

func main() {
	ids := flag.String("device-ids", "", "comma-separated GPU PCI device IDs (0x233010DE)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mig-configs -device-ids ID,... FILE...")
		os.Exit(2)
	}
	var devices []types.DeviceID
	for _, s := range strings.Split(*ids, ",") {
		if s == "" {
			continue
		}
		d, err := types.NewDeviceIDFromString(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mig-configs: -device-ids: %v\n", err)
			os.Exit(2)
		}
		devices = append(devices, d)
	}
	var out []file
	for _, path := range flag.Args() {
		f, err := read(path, devices)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mig-configs: %s: %v\n", path, err)
			os.Exit(2)
		}
		out = append(out, f)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "mig-configs: %v\n", err)
		os.Exit(1)
	}
}

func parserVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/NVIDIA/mig-parted" {
				return d.Path + "@" + d.Version
			}
		}
	}
	return "github.com/NVIDIA/mig-parted"
}

func read(path string, devices []types.DeviceID) (file, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return file{}, err
	}
	var doc map[string]interface{}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return file{}, err
	}
	if doc["kind"] == "ConfigMap" {
		data, _ := doc["data"].(map[string]interface{})
		text, ok := data["config.yaml"].(string)
		if !ok {
			return file{}, fmt.Errorf("ConfigMap has no data[\"config.yaml\"]")
		}
		raw = []byte(text)
		doc = nil
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			return file{}, err
		}
	}
	out := file{Path: path, Parser: parserVersion(), Configs: map[string]config{}}
	var whole v1.Spec
	if err := yaml.Unmarshal(raw, &whole); err != nil {
		out.SpecError = err.Error()
	}
	named, _ := doc["mig-configs"].(map[string]interface{})
	names := make([]string, 0, len(named))
	for n := range named {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		one, err := json.Marshal(map[string]interface{}{
			"version":     doc["version"],
			"mig-configs": map[string]interface{}{name: named[name]},
		})
		if err != nil {
			return file{}, err
		}
		var spec v1.Spec
		if err := yaml.Unmarshal(one, &spec); err != nil {
			out.Configs[name] = config{Error: err.Error()}
			continue
		}
		out.Configs[name] = walk(spec.MigConfigs[name], devices)
	}
	return out, nil
}

func walk(specs v1.MigConfigSpecSlice, devices []types.DeviceID) config {
	c := config{PerDevice: map[string][]int{}}
	for i := range specs {
		s := &specs[i]
		e := entry{Devices: s.Devices, MigEnabled: s.MigEnabled, MigDevices: map[string]int{}}
		switch df := s.DeviceFilter.(type) {
		case string:
			e.DeviceFilter = []string{df}
		case []string:
			e.DeviceFilter = df
		}
		for p, n := range s.MigDevices {
			e.MigDevices[p] = n
		}
		c.Entries = append(c.Entries, e)
		for _, d := range devices {
			if s.MatchesDeviceFilter(d) && s.MatchesDevices(0) {
				c.PerDevice[d.String()] = append(c.PerDevice[d.String()], i)
			}
		}
	}
	for _, d := range devices {
		if _, ok := c.PerDevice[d.String()]; !ok {
			c.PerDevice[d.String()] = []int{}
		}
	}
	return c
}
