// Command cel-cost compiles DRA device selectors as the API server does when a DeviceClass or
// ResourceClaim is created (k8s.io/dynamic-resource-allocation/cel, the release's default feature gates,
// the NewExpressions environment) and reports each one's worst-case cost estimate.
//
// Input: a JSON array of expressions on standard input. Output: a JSON array, one object per expression:
// {"cost": <MaxCost>} or {"error": "<the compiler's detail>"}, and "forbidden": true where the API server
// refuses the selector as "too complex, exceeds cost limit" (MaxCost above CELSelectorExpressionMaxCost).
package main

import (
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type answer struct {
	Cost      *uint64 `json:"cost,omitempty"`
	Error     string  `json:"error,omitempty"`
	Forbidden bool    `json:"forbidden,omitempty"`
}

func main() {
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintln(os.Stderr, "cel-cost:", err)
		os.Exit(2)
	}
	envType := environment.NewExpressions
	compiler := dracel.GetCompiler(dracel.Features{})
	out := make([]answer, 0, len(exprs))
	for _, e := range exprs {
		r := compiler.CompileCELExpression(e, dracel.Options{EnvType: &envType})
		if r.Error != nil {
			out = append(out, answer{Error: r.Error.Detail})
			continue
		}
		c := r.MaxCost
		out = append(out, answer{Cost: &c, Forbidden: c > resourceapi.CELSelectorExpressionMaxCost})
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "cel-cost:", err)
		os.Exit(1)
	}
}
