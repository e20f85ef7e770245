// Command consolidation-oracle runs Karpenter's disruption controller (consolidation) in-process over a
// cluster of existing Karpenter nodes read from one JSON file, applies every command it decides, and prints
// the commands and the steady state the cluster reaches as JSON on stdout.
//
// Set-up, as Karpenter's disruption tests do it (pkg/controllers/disruption/suite_test.go and
// test/expectations.ExpectMakeNodesAndNodeClaimsInitializedAndStateUpdated): a controller-runtime fake
// client (with the spec.nodeName, spec.providerID and status.providerID field indexes Karpenter lists by),
// Karpenter's fake cloud provider with the input's instance types (built as karpenter-oracle builds them), a
// fake clock, the cluster state (state.Cluster) fed by its own informer controllers (node, nodeclaim, pod),
// the provisioner, the orchestration queue, and disruption.NewController with its own methods
// (disruption.NewMethods: emptiness, static drift, drift, multi-node consolidation, single-node
// consolidation, in that order). Each input node becomes a NodeClaim from its NodePool's template
// (scheduling.NewNodeClaimTemplate) with the instance type's single-valued labels, its zone, capacity type and
// instance type, status capacity/allocatable from the type, a provider ID, conditions Launched, Registered,
// Initialized and (unless the NodePool's consolidateAfter is Never) Consolidatable; and a Node linked to it
// (test.NodeClaimLinkedNode), Ready, registered and initialized. Pods are created bound to their node,
// Running and Ready. DaemonSets are stored in the client; their pods are not created: Karpenter's scheduler
// reserves the resources of every compatible DaemonSet on each existing node and new NodeClaim anyway.
// PodDisruptionBudgets get the status Kubernetes' disruption controller would give them when the input has none
// (status.expectedPods 0): expected and healthy = the matching input pods, disruptionsAllowed = healthy -
// desired (minAvailable, or expected - maxUnavailable, percentages rounded up).
//
// NodePools get the defaults the API server applies from the CRD (consolidationPolicy WhenEmptyOrUnderutilized,
// consolidateAfter 0s when absent, budgets [{nodes: 10%}], expireAfter 720h), the fake provider's node class
// (Karpenter lists only NodePools of a class its cloud provider supports, so nodes carry the label
// karpenter.test.sh/testnodeclass instead of the EC2NodeClass one) and Ready conditions.
//
// Each round runs Controller.Reconcile once, with every method wrapped: the first method whose ComputeCommands
// returns a command (after upstream's own validation, which waits consolidationTTL = 15 s on the fake clock,
// stepped whenever a validator waits) has it captured, and the later methods see no candidates, so the
// controller's order, candidate filters and budgets (BuildDisruptionBudgetMapping) are upstream's. The command
// is then applied at once, instead of by the orchestration queue: the candidates' pods are bound where the
// command's scheduling simulation put them (Results.ExistingNodes, or the replacement NodeClaim), the
// candidates' Nodes and NodeClaims are deleted, and each replacement is launched as a new initialized and
// consolidatable node named <nodePool>-r<round>. Input pods owned by a DaemonSet or a Node (not reschedulable
// for Karpenter) go with their node. Rounds repeat until the controller finds nothing (at most maxRounds,
// default 100; "capped" says the cap was hit).
//
// Karpenter orders candidates by disruption cost with an unstable sort over cluster state's node map, so
// among candidates of equal cost the order (and so which of them goes) differs between runs.
//
// Launch rule for a replacement (the rule conformance/tests/karpenter_diff.py launch_choice applies to a
// NodeClaim, the AWS provider's filters): over the replacement's instance-type options and their available
// offerings compatible with its requirements: unless a requirement has minValues, GPU types (a
// karpenter.k8s.aws/instance-gpu-count value) and metal sizes are dropped when other types remain; where the
// requirements allow spot and on-demand and both are offered, types whose spot offerings all cost more than
// the cheapest on-demand offering are dropped; then the capacity type is spot if any option offers spot, the
// price is the lowest at that capacity type, and the type and zone are the first by name among the offerings
// at that price (EC2's own pick among equal-price pools is not modelled).
//
// Input:
//
//	{"nodePools": [karpenter.sh/v1 NodePool], "instanceTypes": [as karpenter-oracle], "wellKnownLabels": [key],
//	 "daemonSets": [apps/v1 DaemonSet], "nodes": [{"name", "nodePool", "instanceType", "zone",
//	 "capacityType"}], "pods": [v1 Pod with spec.nodeName], "pdbs": [policy/v1 PodDisruptionBudget],
//	 "featureGates": {"spotToSpotConsolidation": bool}, "now": RFC 3339 time (default
//	 2025-01-01T00:00:00Z, for budget schedules), "maxRounds": int}
//
// Output:
//
//	{"rounds": [{"method": ConsolidationType() ("empty", "multi", "single"), "reason": Reason() ("Empty",
//	  "Underutilized"), "decision": "delete"|"replace", "candidates": [node], "disruptionCosts": {node: cost},
//	  "moves": {"ns/name": node}, "replacements": [{"name", "nodePool", "instanceType", "zone",
//	  "capacityType", "price", "claim": {"requirements", "instanceTypes": [{"name", "price", "offerings":
//	  [{"zone", "capacityType", "price"}]}]}}]}],
//	 "nodes": [{"name", "nodePool", "instanceType", "zone", "capacityType", "price", "pods": ["ns/name"]}],
//	 "events": {node: ["Reason: message"]} (Unconsolidatable and DisruptionBlocked events of the last
//	  reconcile, the one that found nothing), "capped": bool}
//
// The input is the file named by the only argument, or stdin without one (or with "-"). Bad input is one
// line on stderr and exit code 2; a failure inside the harness or Karpenter, one line and exit code 1.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/awslabs/operatorpkg/object"
	"github.com/samber/lo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kgpu.invalid/conformance/karpenter/internal/oracleio"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/controllers/disruption"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/controllers/state/informer"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	karpopts "sigs.k8s.io/karpenter/pkg/operator/options"
	kscheduling "sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/test"
	"sigs.k8s.io/karpenter/pkg/test/v1alpha1"
	podutils "sigs.k8s.io/karpenter/pkg/utils/pod"
)

const (
	labelGPUCount = "karpenter.k8s.aws/instance-gpu-count"
	labelSize     = "karpenter.k8s.aws/instance-size"
	// upstream's consolidationTTL (pkg/controllers/disruption/consolidation.go), the validators' wait
	validationStep = 15 * time.Second
	eps            = 1e-9
)

type nodeIn struct {
	Name         string `json:"name"`
	NodePool     string `json:"nodePool"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
}

type input struct {
	NodePools       []*v1.NodePool                  `json:"nodePools"`
	InstanceTypes   []oracleio.InstanceTypeIn       `json:"instanceTypes"`
	WellKnownLabels []string                        `json:"wellKnownLabels"`
	DaemonSets      []*appsv1.DaemonSet             `json:"daemonSets"`
	Nodes           []nodeIn                        `json:"nodes"`
	Pods            []*corev1.Pod                   `json:"pods"`
	PDBs            []*policyv1.PodDisruptionBudget `json:"pdbs"`
	FeatureGates    struct {
		SpotToSpotConsolidation bool `json:"spotToSpotConsolidation"`
	} `json:"featureGates"`
	Now       *metav1.Time `json:"now"`
	MaxRounds int          `json:"maxRounds"`
}

type claimOut struct {
	Requirements  []v1.NodeSelectorRequirementWithMinValues `json:"requirements"`
	InstanceTypes []oracleio.OptionOut                      `json:"instanceTypes"`
}

type replacementOut struct {
	Name         string   `json:"name"`
	NodePool     string   `json:"nodePool"`
	InstanceType string   `json:"instanceType"`
	Zone         string   `json:"zone"`
	CapacityType string   `json:"capacityType"`
	Price        float64  `json:"price"`
	Claim        claimOut `json:"claim"`
}

type roundOut struct {
	Method          string             `json:"method"`
	Reason          string             `json:"reason"`
	Decision        string             `json:"decision"`
	Candidates      []string           `json:"candidates"`
	DisruptionCosts map[string]float64 `json:"disruptionCosts"`
	Moves           map[string]string  `json:"moves"`
	Replacements    []replacementOut   `json:"replacements"`
}

type nodeOut struct {
	Name         string   `json:"name"`
	NodePool     string   `json:"nodePool"`
	InstanceType string   `json:"instanceType"`
	Zone         string   `json:"zone"`
	CapacityType string   `json:"capacityType"`
	Price        float64  `json:"price"`
	Pods         []string `json:"pods"`
}

type output struct {
	Rounds []roundOut          `json:"rounds"`
	Nodes  []nodeOut           `json:"nodes"`
	Events map[string][]string `json:"events"`
	Capped bool                `json:"capped"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "consolidation-oracle: "+format+"\n", args...)
	os.Exit(2)
}

// internal is an error of the harness or of Karpenter, not of the input.
func internal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "consolidation-oracle: internal: "+format+"\n", args...)
	os.Exit(1)
}

func instanceType(i int, in oracleio.InstanceTypeIn) *cloudprovider.InstanceType {
	it, err := oracleio.InstanceType(in)
	if err != nil {
		fail("instanceTypes[%d].%v", i, err)
	}
	return it
}

// recorder keeps the disruption events of one reconcile, per node.
type recorder struct {
	mu     sync.Mutex
	events map[string][]string
}

func (r *recorder) Publish(evts ...events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range evts {
		n, ok := e.InvolvedObject.(*corev1.Node)
		if !ok || n == nil {
			continue
		}
		msg := e.Reason + ": " + e.Message
		if !lo.Contains(r.events[n.Name], msg) {
			r.events[n.Name] = append(r.events[n.Name], msg)
		}
	}
}

func (r *recorder) reset() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = map[string][]string{}
	return out
}

// capture wraps one of the controller's methods: the first command any of them computes in a reconcile is
// kept, and from then on every method sees no candidates (the controller stops at the first method that
// disrupts; here the command is applied outside the orchestration queue).
type capture struct {
	disruption.Method
	slot *captured
}

type captured struct {
	cmd    *disruption.Command
	method disruption.Method
}

func (c capture) ShouldDisrupt(ctx context.Context, cn *disruption.Candidate) bool {
	return c.slot.cmd == nil && c.Method.ShouldDisrupt(ctx, cn)
}

func (c capture) ComputeCommands(ctx context.Context, budgets map[string]int, cs ...*disruption.Candidate) ([]disruption.Command, error) {
	if c.slot.cmd != nil {
		return nil, nil
	}
	cmds, err := c.Method.ComputeCommands(ctx, budgets, cs...)
	if err != nil {
		return nil, err
	}
	for i := range cmds {
		if cmds[i].Decision() != disruption.NoOpDecision {
			c.slot.cmd = &cmds[i]
			c.slot.method = c.Method
			break
		}
	}
	return nil, nil
}

type sim struct {
	ctx        context.Context
	kube       client.Client
	clk        *clocktesting.FakeClock
	cluster    *state.Cluster
	nodeCtl    *informer.NodeController
	claimCtl   *informer.NodeClaimController
	podCtl     *informer.PodController
	nodePools  map[string]*v1.NodePool
	types      map[string]*cloudprovider.InstanceType
	providerID int
}

func (s *sim) reconcile(r reconcile.Reconciler, obj client.Object) {
	if _, err := r.Reconcile(s.ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}); err != nil {
		internal("state update for %s: %v", obj.GetName(), err)
	}
}

func offeringPrice(it *cloudprovider.InstanceType, zone, capacityType string) (float64, bool) {
	for _, o := range it.Offerings {
		if o.Zone() == zone && o.CapacityType() == capacityType {
			return o.Price, true
		}
	}
	return 0, false
}

// launch creates an initialized node of the given type and offering from a NodeClaim (its labels, taints and
// requirements as the NodePool's template or the replacement gives them), as the NodeClaim lifecycle and the
// kubelet would: the NodeClaim, then the Node, both fed to cluster state.
func (s *sim) launch(name string, nc *v1.NodeClaim, np *v1.NodePool, it *cloudprovider.InstanceType, zone, capacityType string) {
	nc.Name = name
	nc.GenerateName = ""
	nc.UID = types.UID("nodeclaim-" + name)
	nc.CreationTimestamp = metav1.NewTime(s.clk.Now())
	nc.OwnerReferences = nil
	lbls := map[string]string{}
	for k, r := range it.Requirements {
		if r.Operator() == corev1.NodeSelectorOpIn && r.Len() == 1 {
			lbls[k] = r.Values()[0]
		}
	}
	nc.Labels = lo.Assign(lbls, nc.Labels, map[string]string{
		v1.NodePoolLabelKey:            np.Name,
		corev1.LabelInstanceTypeStable: it.Name,
		corev1.LabelTopologyZone:       zone,
		v1.CapacityTypeLabelKey:        capacityType,
		corev1.LabelHostname:           name,
	})
	s.providerID++
	nc.Status.ProviderID = fmt.Sprintf("fake:///%s/%d", name, s.providerID)
	nc.Status.NodeName = name
	nc.Status.Capacity = lo.PickBy(it.Capacity, func(_ corev1.ResourceName, v resource.Quantity) bool { return !v.IsZero() })
	nc.Status.Allocatable = lo.PickBy(it.Allocatable(), func(_ corev1.ResourceName, v resource.Quantity) bool { return !v.IsZero() })
	nc.StatusConditions().SetTrue(v1.ConditionTypeLaunched)
	nc.StatusConditions().SetTrue(v1.ConditionTypeRegistered)
	nc.StatusConditions().SetTrue(v1.ConditionTypeInitialized)
	// Karpenter sets Consolidatable once consolidateAfter has passed since the last pod event; Never: never.
	if np.Spec.Disruption.ConsolidateAfter.Duration != nil {
		nc.StatusConditions().SetTrue(v1.ConditionTypeConsolidatable)
	}
	node := test.NodeClaimLinkedNode(nc)
	node.Name = name
	node.UID = types.UID("node-" + name)
	node.Spec.Taints = lo.Reject(node.Spec.Taints, func(t corev1.Taint, _ int) bool {
		if t.MatchTaint(&v1.UnregisteredNoExecuteTaint) {
			return true
		}
		return lo.ContainsBy(nc.Spec.StartupTaints, func(st corev1.Taint) bool { return st.MatchTaint(&t) })
	})
	node.Labels = lo.Assign(node.Labels, map[string]string{
		v1.NodeRegisteredLabelKey:  "true",
		v1.NodeInitializedLabelKey: "true",
	})
	node.Status.Phase = corev1.NodeRunning
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	if err := s.kube.Create(s.ctx, nc); err != nil {
		internal("creating nodeclaim %s: %v", name, err)
	}
	if err := s.kube.Create(s.ctx, node); err != nil {
		internal("creating node %s: %v", name, err)
	}
	s.reconcile(s.nodeCtl, node)
	s.reconcile(s.claimCtl, nc)
}

// bind creates the pod on the node (Running, Ready) and feeds it to cluster state.
func (s *sim) bind(p *corev1.Pod, nodeName string) {
	p = p.DeepCopy()
	p.ResourceVersion = ""
	p.Spec.NodeName = nodeName
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue},
	}
	if err := s.kube.Create(s.ctx, p); err != nil {
		internal("creating pod %s: %v", oracleio.Key(p), err)
	}
	s.reconcile(s.podCtl, p)
}

func (s *sim) podsOn(nodeName string) []*corev1.Pod {
	list := &corev1.PodList{}
	if err := s.kube.List(s.ctx, list, client.MatchingFields{"spec.nodeName": nodeName}); err != nil {
		internal("listing pods: %v", err)
	}
	return lo.ToSlicePtr(list.Items)
}

// launchChoice is the launch rule of the doc comment (karpenter_diff.py launch_choice) for a NodeClaim.
func launchChoice(nc *scheduling.NodeClaim) (*cloudprovider.InstanceType, *cloudprovider.Offering) {
	reqs := nc.Requirements
	options := lo.Filter(nc.InstanceTypeOptions, func(it *cloudprovider.InstanceType, _ int) bool {
		return len(it.Offerings.Available().Compatible(reqs)) > 0
	})
	if !reqs.HasMinValues() {
		generic := lo.Reject(options, func(it *cloudprovider.InstanceType, _ int) bool {
			gpu := it.Requirements.Get(labelGPUCount)
			size := it.Requirements.Get(labelSize)
			hasGPU := gpu.Operator() == corev1.NodeSelectorOpIn && lo.ContainsBy(gpu.Values(), func(v string) bool { return v != "0" })
			metal := size.Operator() == corev1.NodeSelectorOpIn && lo.ContainsBy(size.Values(), func(v string) bool { return strings.Contains(v, "metal") })
			return hasGPU || metal
		})
		if len(generic) > 0 {
			options = generic
		}
		ct := reqs.Get(v1.CapacityTypeLabelKey)
		offered := map[string]bool{}
		cheapestOD := math.MaxFloat64
		for _, it := range options {
			for _, o := range it.Offerings.Available().Compatible(reqs) {
				offered[o.CapacityType()] = true
				if o.CapacityType() == v1.CapacityTypeOnDemand {
					cheapestOD = math.Min(cheapestOD, o.Price)
				}
			}
		}
		if ct.Has(v1.CapacityTypeSpot) && ct.Has(v1.CapacityTypeOnDemand) && offered[v1.CapacityTypeSpot] && offered[v1.CapacityTypeOnDemand] {
			options = lo.Filter(options, func(it *cloudprovider.InstanceType, _ int) bool {
				spot := lo.Filter(it.Offerings.Available().Compatible(reqs), func(o *cloudprovider.Offering, _ int) bool {
					return o.CapacityType() == v1.CapacityTypeSpot
				})
				return len(spot) == 0 || lo.ContainsBy(spot, func(o *cloudprovider.Offering) bool { return o.Price <= cheapestOD })
			})
		}
	}
	type offer struct {
		it *cloudprovider.InstanceType
		o  *cloudprovider.Offering
	}
	var offers []offer
	for _, it := range options {
		for _, o := range it.Offerings.Available().Compatible(reqs) {
			offers = append(offers, offer{it, o})
		}
	}
	if len(offers) == 0 {
		return nil, nil
	}
	captype := lo.Ternary(lo.ContainsBy(offers, func(f offer) bool { return f.o.CapacityType() == v1.CapacityTypeSpot }),
		v1.CapacityTypeSpot, v1.CapacityTypeOnDemand)
	offers = lo.Filter(offers, func(f offer, _ int) bool { return f.o.CapacityType() == captype })
	best := lo.MinBy(offers, func(a, b offer) bool { return a.o.Price < b.o.Price }).o.Price
	offers = lo.Filter(offers, func(f offer, _ int) bool { return f.o.Price <= best+eps })
	sort.Slice(offers, func(a, b int) bool {
		if offers[a].it.Name != offers[b].it.Name {
			return offers[a].it.Name < offers[b].it.Name
		}
		return offers[a].o.Zone() < offers[b].o.Zone()
	})
	return offers[0].it, offers[0].o
}

func claimOf(nc *scheduling.NodeClaim) claimOut {
	reqs := nc.Requirements
	out := claimOut{Requirements: reqs.NodeSelectorRequirements(), InstanceTypes: []oracleio.OptionOut{}}
	sort.Slice(out.Requirements, func(a, b int) bool { return out.Requirements[a].Key < out.Requirements[b].Key })
	for _, it := range append(cloudprovider.InstanceTypes(nil), nc.InstanceTypeOptions...).OrderByPrice(reqs) {
		opt := oracleio.OptionOut{Name: it.Name, Offerings: []oracleio.OfferingOut{}}
		compat := it.Offerings.Available().Compatible(reqs)
		for _, o := range compat {
			opt.Offerings = append(opt.Offerings, oracleio.OfferingOut{Zone: o.Zone(), CapacityType: o.CapacityType(), Price: o.Price})
		}
		if len(compat) > 0 {
			opt.Price = compat.Cheapest().Price
		}
		out.InstanceTypes = append(out.InstanceTypes, opt)
	}
	return out
}

// pdbStatus gives a PDB without a status the one Kubernetes' disruption controller computes, with every
// matching input pod expected and healthy.
func pdbStatus(i int, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) {
	if pdb.Status.ExpectedPods > 0 {
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		fail("pdbs[%d].spec.selector: %v", i, err)
	}
	n := int32(len(lo.Filter(pods, func(p *corev1.Pod, _ int) bool {
		return p.Namespace == pdb.Namespace && sel.Matches(labels.Set(p.Labels))
	})))
	desired := n
	switch {
	case pdb.Spec.MinAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(n), true)
		if err != nil {
			fail("pdbs[%d].spec.minAvailable: %v", i, err)
		}
		desired = int32(v)
	case pdb.Spec.MaxUnavailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(n), true)
		if err != nil {
			fail("pdbs[%d].spec.maxUnavailable: %v", i, err)
		}
		desired = max(n-int32(v), 0)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: n, DesiredHealthy: desired, ExpectedPods: n,
		DisruptionsAllowed: max(n-desired, 0),
	}
}

// presence tells which NillableDuration fields the input gives: "Never" unmarshals to the zero value, the same
// as an absent field, which the API server defaults.
type presence struct {
	Spec struct {
		Disruption map[string]json.RawMessage `json:"disruption"`
		Template   struct {
			Spec map[string]json.RawMessage `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func defaults(i int, np *v1.NodePool, given presence) {
	if np.Name == "" {
		fail("nodePools[%d].metadata.name: required", i)
	}
	np.UID = types.UID("nodepool-" + np.Name)
	d := &np.Spec.Disruption
	if d.ConsolidationPolicy == "" {
		d.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	}
	if _, ok := given.Spec.Disruption["consolidateAfter"]; !ok {
		d.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	}
	if d.Budgets == nil {
		d.Budgets = []v1.Budget{{Nodes: "10%"}}
	}
	for j := range d.Budgets {
		if d.Budgets[j].Nodes == "" {
			d.Budgets[j].Nodes = "10%"
		}
	}
	if _, ok := given.Spec.Template.Spec["expireAfter"]; !ok {
		np.Spec.Template.Spec.ExpireAfter = v1.MustParseNillableDuration("720h")
	}
	// the fake cloud provider's node class: Karpenter lists only NodePools its cloud provider supports
	gvk := object.GVK(&v1alpha1.TestNodeClass{})
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: gvk.Group, Kind: gvk.Kind, Name: "default"}
	np.StatusConditions().SetTrue(v1.ConditionTypeValidationSucceeded)
	np.StatusConditions().SetTrue(v1.ConditionTypeNodeClassReady)
	if !np.StatusConditions().Root().IsTrue() {
		internal("nodepool %s is not Ready", np.Name)
	}
}

func readInput() (input, []presence) {
	var raw []byte
	var err error
	name := "stdin"
	switch {
	case len(os.Args) > 2:
		fmt.Fprintln(os.Stderr, "usage: consolidation-oracle [INPUT.json]")
		os.Exit(2)
	case len(os.Args) == 2 && os.Args[1] != "-":
		name = os.Args[1]
		raw, err = os.ReadFile(name)
	default:
		raw, err = io.ReadAll(os.Stdin)
	}
	if err != nil {
		fail("%v", err)
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		fail("%s: %v", name, err)
	}
	var given struct {
		NodePools []presence `json:"nodePools"`
	}
	if err := json.Unmarshal(raw, &given); err != nil {
		fail("%s: %v", name, err)
	}
	return in, given.NodePools
}

//nolint:gocyclo
func main() {
	in, given := readInput()
	log.SetLogger(logging.NopLogger)
	v1.WellKnownLabels.Insert(in.WellKnownLabels...)
	ctx := karpopts.ToContext(injection.WithControllerName(context.Background(), "disruption"), test.Options())
	karpopts.FromContext(ctx).FeatureGates.SpotToSpotConsolidation = in.FeatureGates.SpotToSpotConsolidation
	maxRounds := lo.Ternary(in.MaxRounds > 0, in.MaxRounds, 100)

	if len(in.NodePools) == 0 {
		fail("nodePools: at least one NodePool is required")
	}
	s := &sim{ctx: ctx, nodePools: map[string]*v1.NodePool{}, types: map[string]*cloudprovider.InstanceType{}}
	for i, np := range in.NodePools {
		defaults(i, np, given[i])
		if s.nodePools[np.Name] != nil {
			fail("nodePools[%d]: duplicate name %s", i, np.Name)
		}
		s.nodePools[np.Name] = np
	}
	its := make([]*cloudprovider.InstanceType, 0, len(in.InstanceTypes))
	for i, it := range in.InstanceTypes {
		t := instanceType(i, it)
		its = append(its, t)
		s.types[t.Name] = t
	}
	nodeNames := map[string]bool{}
	for i, n := range in.Nodes {
		if n.Name == "" {
			fail("nodes[%d].name: required", i)
		}
		if nodeNames[n.Name] {
			fail("nodes[%d]: duplicate name %s", i, n.Name)
		}
		nodeNames[n.Name] = true
		if s.nodePools[n.NodePool] == nil {
			fail("nodes[%d].nodePool: no NodePool %q", i, n.NodePool)
		}
		it := s.types[n.InstanceType]
		if it == nil {
			fail("nodes[%d].instanceType: no instance type %q", i, n.InstanceType)
		}
		if _, ok := offeringPrice(it, n.Zone, n.CapacityType); !ok {
			fail("nodes[%d]: %s has no %s offering in %q", i, n.InstanceType, n.CapacityType, n.Zone)
		}
	}
	for i, p := range in.Pods {
		if p.Name == "" {
			fail("pods[%d].metadata.name: required", i)
		}
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		if !nodeNames[p.Spec.NodeName] {
			fail("pods[%d].spec.nodeName: no node %q", i, p.Spec.NodeName)
		}
		p.UID = types.UID(fmt.Sprintf("pod-%08d", i))
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if in.Now != nil {
		now = in.Now.Time
	}
	s.clk = clocktesting.NewFakeClock(now)

	cp := fake.NewCloudProvider()
	cp.InstanceTypes = its
	s.kube = fakecr.NewClientBuilder().
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Node{}, "spec.providerID", func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
		WithIndex(&v1.NodeClaim{}, "status.providerID", func(o client.Object) []string { return []string{o.(*v1.NodeClaim).Status.ProviderID} }).
		Build()
	s.cluster = state.NewCluster(s.clk, s.kube, cp)
	s.nodeCtl = informer.NewNodeController(s.kube, s.cluster)
	s.claimCtl = informer.NewNodeClaimController(s.kube, cp, s.cluster)
	s.podCtl = informer.NewPodController(s.kube, s.cluster)
	rec := &recorder{events: map[string][]string{}}
	prov := provisioning.NewProvisioner(s.kube, rec, cp, s.cluster, s.clk)
	queue := disruption.NewQueue(s.kube, rec, s.cluster, s.clk, prov)
	slot := &captured{}
	methods := lo.Map(disruption.NewMethods(s.clk, s.cluster, s.kube, prov, cp, rec, queue), func(m disruption.Method, _ int) disruption.Method {
		return capture{Method: m, slot: slot}
	})
	controller := disruption.NewController(s.clk, s.kube, prov, cp, rec, s.cluster, queue, disruption.WithMethods(methods...))

	for _, np := range in.NodePools {
		if err := s.kube.Create(ctx, np.DeepCopy()); err != nil {
			internal("creating nodepool %s: %v", np.Name, err)
		}
	}
	for i, ds := range in.DaemonSets {
		if ds.Namespace == "" {
			ds.Namespace = "default"
		}
		ds.UID = types.UID(fmt.Sprintf("daemonset-%08d", i))
		if err := s.kube.Create(ctx, ds); err != nil {
			fail("daemonSets[%d]: %v", i, err)
		}
	}
	for i, pdb := range in.PDBs {
		if pdb.Namespace == "" {
			pdb.Namespace = "default"
		}
		pdbStatus(i, pdb, in.Pods)
		if err := s.kube.Create(ctx, pdb); err != nil {
			fail("pdbs[%d]: %v", i, err)
		}
	}
	for _, n := range in.Nodes {
		np := s.nodePools[n.NodePool]
		it := s.types[n.InstanceType]
		nct := scheduling.NewNodeClaimTemplate(np)
		nc := nct.NodeClaim.DeepCopy()
		reqs := kscheduling.NewRequirements(nct.Requirements.Values()...)
		reqs.Add(kscheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, it.Name))
		reqs.Add(kscheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, n.Zone))
		reqs.Add(kscheduling.NewRequirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, n.CapacityType))
		nc.Spec.Requirements = reqs.NodeSelectorRequirements()
		s.launch(n.Name, nc, np, it, n.Zone, n.CapacityType)
	}
	for _, p := range in.Pods {
		s.bind(p, p.Spec.NodeName)
	}
	// Daemon pods are not created, so state has none to record (Cluster.GetDaemonSetPod falls back to the
	// DaemonSet's template, as provisioning.getDaemonSetPods does).

	out := output{Rounds: []roundOut{}, Events: map[string][]string{}}
	for round := 1; ; round++ {
		if round > maxRounds {
			out.Capped = true
			break
		}
		slot.cmd, slot.method = nil, nil
		rec.reset()
		if !s.cluster.Synced(ctx) {
			internal("cluster state not synced before round %d", round)
		}
		done := make(chan error, 1)
		go func() {
			_, err := controller.Reconcile(ctx)
			done <- err
		}()
	wait:
		for {
			select {
			case err := <-done:
				if err != nil {
					internal("disruption reconcile (round %d): %v", round, err)
				}
				break wait
			case <-time.After(time.Millisecond):
				// a validator waits consolidationTTL on the clock before re-checking its command
				if s.clk.HasWaiters() {
					s.clk.Step(validationStep)
				}
			}
		}
		evts := rec.reset()
		if slot.cmd == nil {
			out.Events = evts
			break
		}
		out.Rounds = append(out.Rounds, s.apply(round, slot.method, slot.cmd))
		s.clk.Step(time.Second)
	}

	list := &corev1.NodeList{}
	if err := s.kube.List(ctx, list); err != nil {
		internal("listing nodes: %v", err)
	}
	inputPods := map[string]bool{}
	for _, p := range in.Pods {
		inputPods[oracleio.Key(p)] = true
	}
	for _, n := range list.Items {
		it := s.types[n.Labels[corev1.LabelInstanceTypeStable]]
		price, _ := offeringPrice(it, n.Labels[corev1.LabelTopologyZone], n.Labels[v1.CapacityTypeLabelKey])
		node := nodeOut{
			Name: n.Name, NodePool: n.Labels[v1.NodePoolLabelKey], InstanceType: it.Name,
			Zone: n.Labels[corev1.LabelTopologyZone], CapacityType: n.Labels[v1.CapacityTypeLabelKey], Price: price,
			Pods: []string{},
		}
		for _, p := range s.podsOn(n.Name) {
			if inputPods[oracleio.Key(p)] {
				node.Pods = append(node.Pods, oracleio.Key(p))
			}
		}
		sort.Strings(node.Pods)
		out.Nodes = append(out.Nodes, node)
	}
	sort.Slice(out.Nodes, func(a, b int) bool { return out.Nodes[a].Name < out.Nodes[b].Name })
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		internal("writing output: %v", err)
	}
}

// apply carries a command out at once: replacements launched (launchChoice), the candidates' pods bound
// where the command's scheduling simulation placed them, the candidates' Nodes and NodeClaims deleted.
func (s *sim) apply(round int, m disruption.Method, cmd *disruption.Command) roundOut {
	r := roundOut{
		Method: m.ConsolidationType(), Reason: string(m.Reason()), Decision: string(cmd.Decision()),
		Candidates: []string{}, DisruptionCosts: map[string]float64{}, Moves: map[string]string{},
		Replacements: []replacementOut{},
	}
	for _, c := range cmd.Candidates {
		r.Candidates = append(r.Candidates, c.Name())
		r.DisruptionCosts[c.Name()] = c.DisruptionCost
	}
	for _, en := range cmd.Results.ExistingNodes {
		for _, p := range en.Pods {
			r.Moves[oracleio.Key(p)] = en.Name()
		}
	}
	for i, rp := range cmd.Replacements {
		np := s.nodePools[rp.NodePoolName]
		if np == nil {
			internal("replacement for unknown nodepool %q", rp.NodePoolName)
		}
		claim := claimOf(rp.NodeClaim)
		it, o := launchChoice(rp.NodeClaim)
		if it == nil {
			internal("round %d: no instance type to launch for the replacement (%d options)", round, len(rp.InstanceTypeOptions))
		}
		name := fmt.Sprintf("%s-r%d", np.Name, round)
		if len(cmd.Replacements) > 1 {
			name = fmt.Sprintf("%s-%d", name, i)
		}
		for _, p := range rp.Pods {
			r.Moves[oracleio.Key(p)] = name
		}
		nc := rp.ToNodeClaim()
		s.launch(name, nc, np, it, o.Zone(), o.CapacityType())
		r.Replacements = append(r.Replacements, replacementOut{
			Name: name, NodePool: np.Name, InstanceType: it.Name, Zone: o.Zone(), CapacityType: o.CapacityType(),
			Price: o.Price, Claim: claim,
		})
	}
	var moved []*corev1.Pod
	for _, c := range cmd.Candidates {
		for _, p := range s.podsOn(c.Name()) {
			target, ok := r.Moves[oracleio.Key(p)]
			if !ok && podutils.IsReschedulable(p) {
				internal("round %d: pod %s on candidate %s has no place in the command", round, oracleio.Key(p), c.Name())
			}
			if err := s.kube.Delete(s.ctx, p); err != nil {
				internal("deleting pod %s: %v", oracleio.Key(p), err)
			}
			s.reconcile(s.podCtl, p)
			if ok {
				p.Spec.NodeName = target
				moved = append(moved, p)
			}
		}
		if err := s.kube.Delete(s.ctx, c.Node); err != nil {
			internal("deleting node %s: %v", c.Name(), err)
		}
		if err := s.kube.Delete(s.ctx, c.NodeClaim); err != nil {
			internal("deleting nodeclaim %s: %v", c.NodeClaim.Name, err)
		}
		s.reconcile(s.nodeCtl, c.Node)
		s.reconcile(s.claimCtl, c.NodeClaim)
	}
	for _, p := range moved {
		s.bind(p, p.Spec.NodeName)
	}
	return r
}
