// Command karpenter-oracle runs Karpenter's provisioning scheduler (Scheduler.Solve) in-process over
// NodePools, instance types, DaemonSets and pending pods read from one JSON file, and prints the new
// NodeClaims and the pod errors as JSON on stdout.
//
// The scheduler is set up as Karpenter's provisioner does it (provisioning.Provisioner.NewScheduler):
// NodePools ordered by weight, the same instance types for every NodePool (one EC2NodeClass), a topology
// built from the pods, DaemonSet pods from their templates, and the provisioner's scheduler options
// (strict reserved-capacity mode, strict minValues, preferences respected). The cloud provider is
// Karpenter's fake one; the instance types are built from the input (kgpu's catalog) instead of its
// generated ones.
//
// Input:
//
//	{"nodePools": [karpenter.sh/v1 NodePool], "instanceTypes": [{"name", "capacity", "kubeReserved",
//	 "requirements": [NodeSelectorRequirement], "offerings": [{"zone", "capacityType", "price",
//	 "available"}]}], "daemonSets": [apps/v1 DaemonSet], "pods": [v1 Pod], "wellKnownLabels": [key],
//	 "nodeOverlays": [karpenter.sh/v1alpha1 NodeOverlay]}
//
// With nodeOverlays (feature gate NodeOverlay on), Karpenter's own NodeOverlay controller reconciles them
// against the NodePools and instance types into its InstanceTypeStore, and each NodePool's instance types
// are those of the overlay cloud-provider decorator (overlay.Decorate): price, priceAdjustment and capacity
// applied in weight order, conflicting overlays left out. The output then names the overlays that did not
// validate ("overlayErrors": {name: reason}; null without overlays).
//
// Output:
//
//	{"nodeClaims": [{"nodePool", "requirements", "pods": ["ns/name"], "instanceTypes": [{"name",
//	 "price", "offerings": [{"zone", "capacityType", "price"}]}]}], "podErrors": {"ns/name": "text"}}
//
// Bad input is one line on stderr and exit code 2.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/samber/lo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kgpu.invalid/conformance/karpenter/internal/oracleio"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers/nodeoverlay"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	karpopts "sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/test"
	"sigs.k8s.io/karpenter/pkg/utils/daemonset"
	nodepoolutils "sigs.k8s.io/karpenter/pkg/utils/nodepool"
)

type input struct {
	NodePools       []*v1.NodePool            `json:"nodePools"`
	InstanceTypes   []oracleio.InstanceTypeIn `json:"instanceTypes"`
	DaemonSets      []*appsv1.DaemonSet       `json:"daemonSets"`
	Pods            []*corev1.Pod             `json:"pods"`
	WellKnownLabels []string                  `json:"wellKnownLabels"`
	NodeOverlays    []*v1alpha1.NodeOverlay   `json:"nodeOverlays"`
}

type nodeClaimOut struct {
	NodePool      string                                    `json:"nodePool"`
	Requirements  []v1.NodeSelectorRequirementWithMinValues `json:"requirements"`
	InstanceTypes []oracleio.OptionOut                      `json:"instanceTypes"`
	Pods          []string                                  `json:"pods"`
}

type output struct {
	NodeClaims []nodeClaimOut    `json:"nodeClaims"`
	PodErrors  map[string]string `json:"podErrors"`
	// NodeOverlays whose ValidationSucceeded condition is False, with its message
	OverlayErrors map[string]string `json:"overlayErrors"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "karpenter-oracle: "+format+"\n", args...)
	os.Exit(2)
}

func instanceType(i int, in oracleio.InstanceTypeIn) *cloudprovider.InstanceType {
	it, err := oracleio.InstanceType(in)
	if err != nil {
		fail("instanceTypes[%d].%v", i, err)
	}
	return it
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: karpenter-oracle INPUT.json")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		fail("%s: %v", os.Args[1], err)
	}
	log.SetLogger(logging.NopLogger)
	v1.WellKnownLabels.Insert(in.WellKnownLabels...)

	ctx := karpopts.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())

	if len(in.NodePools) == 0 {
		fail("nodePools: at least one NodePool is required")
	}
	for i, np := range in.NodePools {
		if np.Name == "" {
			fail("nodePools[%d].metadata.name: required", i)
		}
		if np.Spec.Template.Spec.NodeClassRef == nil {
			np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
		}
		np.UID = types.UID("nodepool-" + np.Name)
	}
	nodePools := in.NodePools
	nodepoolutils.OrderByWeight(nodePools)

	its := make([]*cloudprovider.InstanceType, 0, len(in.InstanceTypes))
	for i, it := range in.InstanceTypes {
		its = append(its, instanceType(i, it))
	}
	cloudProvider := fake.NewCloudProvider()
	cloudProvider.InstanceTypes = its
	var provider cloudprovider.CloudProvider = cloudProvider
	var overlayErrors map[string]string // null without overlays
	if len(in.NodeOverlays) > 0 {
		karpopts.FromContext(ctx).FeatureGates.NodeOverlay = true
		provider, overlayErrors = overlaid(ctx, cloudProvider, nodePools, in.NodeOverlays)
	}
	instanceTypes := map[string][]*cloudprovider.InstanceType{}
	for _, np := range nodePools {
		npIts, err := provider.GetInstanceTypes(ctx, np)
		if err != nil {
			fail("instance types of nodepool %s: %v", np.Name, err)
		}
		instanceTypes[np.Name] = npIts
	}

	// UIDs in input order: Karpenter's queue breaks CPU/memory ties by creation time, then UID.
	for i, p := range in.Pods {
		if p.Name == "" {
			fail("pods[%d].metadata.name: required", i)
		}
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		p.UID = types.UID(fmt.Sprintf("pod-%08d", i))
	}
	var daemonSetPods []*corev1.Pod
	for i, ds := range in.DaemonSets {
		pod := daemonset.PodForDaemonSet(ds)
		if pod == nil {
			fail("daemonSets[%d]: no pod template", i)
		}
		// Named like a running daemon pod, as the provisioner's cluster state gives it
		// (Cluster.GetDaemonSetPod): host-port usage is keyed by pod name, and unnamed template pods of
		// two DaemonSets would share one key.
		pod.Namespace = lo.Ternary(ds.Namespace == "", "default", ds.Namespace)
		pod.Name = ds.Name + "-daemon"
		pod.UID = types.UID(fmt.Sprintf("daemon-%08d", i))
		daemonSetPods = append(daemonSetPods, pod)
	}

	kubeClient := fakecr.NewFakeClient()
	clk := &clock.RealClock{}
	cluster := state.NewCluster(clk, kubeClient, cloudProvider)

	opts := []scheduling.Options{
		scheduling.DisableReservedCapacityFallback,
		scheduling.NumConcurrentReconciles(1),
		scheduling.MinValuesPolicy(karpopts.FromContext(ctx).MinValuesPolicy),
	}
	topology, err := scheduling.NewTopology(ctx, kubeClient, cluster, nil, nodePools, instanceTypes, in.Pods, opts...)
	if err != nil {
		fail("building topology: %v", err)
	}
	s := scheduling.NewScheduler(ctx, kubeClient, nodePools, cluster, nil, topology, instanceTypes, daemonSetPods,
		events.NewRecorder(&record.FakeRecorder{}), clk, opts...)
	pods := append([]*corev1.Pod(nil), in.Pods...)
	results, err := s.Solve(ctx, pods)
	if err != nil {
		fail("solve: %v", err)
	}

	out := output{NodeClaims: []nodeClaimOut{}, PodErrors: map[string]string{}, OverlayErrors: overlayErrors}
	for p, e := range results.PodErrors {
		out.PodErrors[oracleio.Key(p)] = e.Error()
	}
	for _, nc := range results.NewNodeClaims {
		reqs := nc.Requirements
		claim := nodeClaimOut{NodePool: nc.NodePoolName, Requirements: reqs.NodeSelectorRequirements(), Pods: []string{}}
		sort.Slice(claim.Requirements, func(a, b int) bool { return claim.Requirements[a].Key < claim.Requirements[b].Key })
		for _, p := range nc.Pods {
			claim.Pods = append(claim.Pods, oracleio.Key(p))
		}
		for _, it := range nc.InstanceTypeOptions.OrderByPrice(reqs) {
			opt := oracleio.OptionOut{Name: it.Name, Offerings: []oracleio.OfferingOut{}}
			compat := it.Offerings.Available().Compatible(reqs)
			for _, o := range compat {
				opt.Offerings = append(opt.Offerings, oracleio.OfferingOut{Zone: o.Zone(), CapacityType: o.CapacityType(), Price: o.Price})
			}
			if len(compat) > 0 {
				opt.Price = compat.Cheapest().Price
			}
			claim.InstanceTypes = append(claim.InstanceTypes, opt)
		}
		out.NodeClaims = append(out.NodeClaims, claim)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		fail("writing output: %v", err)
	}
}

// overlaid runs Karpenter's NodeOverlay controller once over the NodePools and overlays (a fake API client
// holds them) and returns the cloud provider as the operator decorates it with the resulting store, and the
// overlays the controller marked invalid (runtime validation or a conflict), with the reason.
func overlaid(ctx context.Context, cp *fake.CloudProvider, nodePools []*v1.NodePool, overlays []*v1alpha1.NodeOverlay) (cloudprovider.CloudProvider, map[string]string) {
	builder := fakecr.NewClientBuilder().WithStatusSubresource(&v1alpha1.NodeOverlay{})
	for _, np := range nodePools {
		builder = builder.WithObjects(np.DeepCopy())
	}
	for i, o := range overlays {
		if o.Name == "" {
			fail("nodeOverlays[%d].metadata.name: required", i)
		}
		builder = builder.WithObjects(o.DeepCopy())
	}
	kubeClient := builder.Build()
	store := nodeoverlay.NewInstanceTypeStore()
	cluster := state.NewCluster(&clock.RealClock{}, kubeClient, cp)
	controller := nodeoverlay.NewController(kubeClient, cp, store, cluster)
	for attempt := 0; ; attempt++ {
		res, err := controller.Reconcile(ctx, reconcile.Request{})
		if err != nil {
			fail("reconciling nodeoverlays: %v", err)
		}
		if !res.Requeue {
			break
		}
		if attempt > 3 {
			fail("reconciling nodeoverlays: still requeued after %d attempts", attempt)
		}
	}
	errs := map[string]string{}
	list := &v1alpha1.NodeOverlayList{}
	if err := kubeClient.List(ctx, list); err != nil {
		fail("listing nodeoverlays: %v", err)
	}
	for _, o := range list.Items {
		if c := o.StatusConditions().Get(v1alpha1.ConditionTypeValidationSucceeded); c != nil && c.IsFalse() {
			errs[o.Name] = c.Reason + ": " + c.Message
		}
	}
	return overlay.Decorate(cp, kubeClient, store), errs
}
