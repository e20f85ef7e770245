// Command dra-oracle places pods with resource claims with the real kube-scheduler framework and its
// DynamicResources plugin, in-process, and reports the devices the structured allocator chose.
//
// It reads the files `kgpu simulate` reads (JSON files holding a v1 List, or single objects): Nodes,
// Pods, PriorityClasses and the resource.k8s.io/v1 kinds DeviceClass, ResourceClaim,
// ResourceClaimTemplate and ResourceSlice. The DRA objects go into a fake clientset; the scheduler's own
// DRA manager (an assume cache of claims, the ResourceSlice tracker, the DeviceClass lister) reads them
// through informers, as kube-scheduler does. Feature gates are the release's defaults (DRA GA,
// DRAPrioritizedList and DRAAdminAccess beta and on, the alpha DRA gates off).
//
// The resourceclaim controller is played before scheduling: for every pending pod's claim that names a
// ResourceClaimTemplate and that the pod's status.resourceClaimStatuses does not name yet, the claim
// <pod>-<claim> is created from the template, owned by the pod (the controller adds a random suffix;
// kgpu names the claim without one), and the pod's status names it. A missing template leaves the
// status empty (PreFilter: "ResourceClaim not created yet").
//
// Pods are scheduled one at a time in kgpu's queue order (priority descending, then input order), over
// every node, score ties to the node name that sorts first, as scheduler-oracle does. A placed pod runs
// Reserve and PreBind: DynamicResources writes the allocation and reservation into the claim through
// the clientset and its assume cache, so later pods see the devices taken and the claim allocated.
//
// DRA_ORACLE_PREFER names a JSON file of {"ns/pod": [devices]}: the devices another scheduler (kgpu)
// allocated. Where the plugin allocated others on the same node, the cycle is run again on that node until
// it takes those (see reserve): the real allocator's pool and slice order changes from run to run, and
// steering among its own outcomes keeps the later pods comparable.
//
// A pod that a PreEnqueue plugin rejects (DynamicResources: a claim missing or being deleted) never enters
// the scheduling queue: {"pod":..., "message": <the plugin's status message>, "not_enqueued": true}.
// A pod that fits no node gets PostFilter's words in its message, as the real FailedScheduling event does
// (DynamicResources' deallocation, then DefaultPreemption's dry run).
//
// Output: one JSON object per pending pod, one per line: {"pod":"ns/name","node":"...","devices":[...]}
// with each allocated device as {"claim","request","driver","pool","device","adminAccess"}, or
// {"pod":"ns/name","message":"0/3 nodes are available: ..."}; an error status of a plugin (a CEL
// runtime error, "All" on an incomplete pool) gives {"pod":..., "message": <error>, "error": true,
// "errors": [...]}: the message is the first node's error in node order, and "errors" every node's
// distinct error (kube-scheduler filters 16 nodes in parallel and reports whichever error comes first).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	draCEL "k8s.io/dynamic-resource-allocation/cel"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

type device struct {
	Claim       string `json:"claim"`
	Request     string `json:"request"`
	Driver      string `json:"driver"`
	Pool        string `json:"pool"`
	Device      string `json:"device"`
	AdminAccess bool   `json:"adminAccess,omitempty"`
}

type result struct {
	Pod     string   `json:"pod"`
	Node    string   `json:"node,omitempty"`
	Message string   `json:"message,omitempty"`
	Error   bool     `json:"error,omitempty"`
	Errors  []string `json:"errors,omitempty"`
	Devices []device `json:"devices,omitempty"`
	// other allocations the real allocator makes on the same node, in other pool and slice orders
	Alternatives [][]device `json:"alternatives,omitempty"`
	// the plugin first took other devices, and took the preferred ones when run again (DRA_ORACLE_PREFER)
	Steered bool `json:"steered,omitempty"`
	// a PreEnqueue plugin kept the pod out of the scheduling queue: never tried, no FailedScheduling event;
	// Message is that plugin's status message
	NotEnqueued bool `json:"not_enqueued,omitempty"`
}

type inputs struct {
	nodes     []*v1.Node
	bound     []*v1.Pod
	pending   []*v1.Pod
	classes   map[string]int32
	defaultPr int32
	dra       []runtime.Object
	templates map[string]*resourceapi.ResourceClaimTemplate
	claims    map[string]bool
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dra-oracle FILE.json [FILE.json...]")
		os.Exit(2)
	}
	in := &inputs{classes: map[string]int32{}, templates: map[string]*resourceapi.ResourceClaimTemplate{}, claims: map[string]bool{}}
	scheme := runtime.NewScheme()
	if err := corev1defaults.AddToScheme(scheme); err != nil {
		fail(err)
	}
	for _, path := range os.Args[1:] {
		if err := in.read(path, scheme); err != nil {
			fail(fmt.Errorf("%s: %w", path, err))
		}
	}
	results, err := schedule(in)
	if err != nil {
		fail(err)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "dra-oracle:", err)
	os.Exit(2)
}

func meta(o metav1.Object, kind string) {
	if o.GetNamespace() == "" && (kind == "ResourceClaim" || kind == "ResourceClaimTemplate" || kind == "Pod") {
		o.SetNamespace("default")
	}
	if o.GetUID() == "" {
		o.SetUID(types.UID("uid-" + kind + "-" + o.GetNamespace() + "-" + o.GetName()))
	}
	// the assume cache compares resource versions; the fake clientset keeps them as given
	o.SetResourceVersion("1")
}

// read takes a v1 List or a single object.
func (in *inputs) read(path string, scheme *runtime.Scheme) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	items := doc.Items
	if doc.Kind != "List" {
		items = []json.RawMessage{data}
	}
	for _, raw := range items {
		var m struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		switch m.Kind {
		case "Node":
			n := &v1.Node{}
			if err := json.Unmarshal(raw, n); err != nil {
				return err
			}
			scheme.Default(n)
			in.nodes = append(in.nodes, n)
		case "Pod":
			p := &v1.Pod{}
			if err := json.Unmarshal(raw, p); err != nil {
				return err
			}
			meta(p, "Pod")
			scheme.Default(p)
			if p.Spec.NodeName != "" {
				in.bound = append(in.bound, p)
			} else {
				in.pending = append(in.pending, p)
			}
		case "PriorityClass":
			pc := &schedulingv1.PriorityClass{}
			if err := json.Unmarshal(raw, pc); err != nil {
				return err
			}
			in.classes[pc.Name] = pc.Value
			if pc.GlobalDefault {
				in.defaultPr = pc.Value
			}
		case "DeviceClass":
			o := &resourceapi.DeviceClass{}
			if err := json.Unmarshal(raw, o); err != nil {
				return err
			}
			meta(o, m.Kind)
			in.dra = append(in.dra, o)
		case "ResourceSlice":
			o := &resourceapi.ResourceSlice{}
			if err := json.Unmarshal(raw, o); err != nil {
				return err
			}
			meta(o, m.Kind)
			in.dra = append(in.dra, o)
		case "ResourceClaim":
			o := &resourceapi.ResourceClaim{}
			if err := json.Unmarshal(raw, o); err != nil {
				return err
			}
			meta(o, m.Kind)
			defaultClaimSpec(&o.Spec)
			in.claims[o.Namespace+"/"+o.Name] = true
			in.dra = append(in.dra, o)
		case "ResourceClaimTemplate":
			o := &resourceapi.ResourceClaimTemplate{}
			if err := json.Unmarshal(raw, o); err != nil {
				return err
			}
			meta(o, m.Kind)
			defaultClaimSpec(&o.Spec.Spec)
			in.templates[o.Namespace+"/"+o.Name] = o
			in.dra = append(in.dra, o)
		default:
			return fmt.Errorf("kind %q is not read by the oracle", m.Kind)
		}
	}
	return nil
}

// defaultClaimSpec applies the API server's defaults for resource.k8s.io/v1 (allocationMode ExactCount
// and count 1 when absent), which the allocator expects to be set.
func defaultClaimSpec(spec *resourceapi.ResourceClaimSpec) {
	def := func(mode *resourceapi.DeviceAllocationMode, count *int64) {
		if *mode == "" {
			*mode = resourceapi.DeviceAllocationModeExactCount
		}
		if *mode == resourceapi.DeviceAllocationModeExactCount && *count == 0 {
			*count = 1
		}
	}
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		if r.Exactly != nil {
			def(&r.Exactly.AllocationMode, &r.Exactly.Count)
		}
		for j := range r.FirstAvailable {
			s := &r.FirstAvailable[j]
			def(&s.AllocationMode, &s.Count)
		}
	}
}

// claimController creates the claims of the pending pods' templates, as the resourceclaim controller does.
func (in *inputs) claimController() {
	for _, p := range in.pending {
		for _, pc := range p.Spec.ResourceClaims {
			if pc.ResourceClaimTemplateName == nil {
				continue
			}
			named := false
			for _, st := range p.Status.ResourceClaimStatuses {
				if st.Name == pc.Name {
					named = true
				}
			}
			if named {
				continue
			}
			tpl, ok := in.templates[p.Namespace+"/"+*pc.ResourceClaimTemplateName]
			if !ok {
				continue
			}
			name := p.Name + "-" + pc.Name
			if !in.claims[p.Namespace+"/"+name] {
				yes := true
				claim := &resourceapi.ResourceClaim{
					ObjectMeta: metav1.ObjectMeta{
						Name: name, Namespace: p.Namespace, Labels: tpl.Spec.Labels, Annotations: map[string]string{"resource.kubernetes.io/pod-claim-name": pc.Name},
						OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: &yes, BlockOwnerDeletion: &yes}},
					},
					Spec: *tpl.Spec.Spec.DeepCopy(),
				}
				meta(claim, "ResourceClaim")
				in.claims[p.Namespace+"/"+name] = true
				in.dra = append(in.dra, claim)
			}
			n := name
			p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: &n})
		}
	}
}

// priority resolves spec.priority the way the Priority admission plugin does.
func (in *inputs) priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	v := in.defaultPr
	if c, ok := in.classes[p.Spec.PriorityClassName]; ok {
		v = c
	}
	p.Spec.Priority = &v
	return v
}

func schedule(in *inputs) ([]result, error) {
	metrics.Register()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := klog.FromContext(ctx)
	if !feature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
		return nil, fmt.Errorf("the DynamicResourceAllocation feature gate is off in this build")
	}

	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	profile := &cfg.Profiles[0]
	pct := int32(100)
	profile.PercentageOfNodesToScore = &pct

	in.claimController()
	objects := append([]runtime.Object(nil), in.dra...)
	for _, p := range append(append([]*v1.Pod(nil), in.bound...), in.pending...) {
		objects = append(objects, p)
	}
	client := fake.NewSimpleClientset(objects...)
	// the API server gives every write a newer resourceVersion: the assume cache takes only newer objects
	version := 1
	client.PrependReactor("*", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if u, ok := action.(clienttesting.UpdateAction); ok {
			if o, err := apimeta.Accessor(u.GetObject()); err == nil {
				version++
				o.SetResourceVersion(strconv.Itoa(version))
			}
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)

	claimInformer := factory.Resource().V1().ResourceClaims().Informer()
	claimCache := assumecache.NewAssumeCache(logger, claimInformer, "ResourceClaim", "", nil)
	tracker, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{
		EnableDeviceTaints:       feature.DefaultFeatureGate.Enabled(features.DRADeviceTaints),
		EnableConsumableCapacity: feature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity),
		SliceInformer:            factory.Resource().V1().ResourceSlices(),
		KubeClient:               client,
	})
	if err != nil {
		return nil, err
	}
	draManager := dynamicresources.NewDRAManager(ctx, claimCache, tracker, factory)

	cache := internalcache.New(ctx, 0, nil)
	snapshot := internalcache.NewEmptySnapshot()
	f, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSharedDRAManager(draManager),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithParallelism(1),
	)
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// the slice tracker has its own event handlers: wait until it lists every slice
	want := 0
	for _, o := range in.dra {
		if _, ok := o.(*resourceapi.ResourceSlice); ok {
			want++
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, err := tracker.ListPatchedResourceSlices()
		return err == nil && len(got) == want, nil
	}); err != nil {
		return nil, fmt.Errorf("the ResourceSlice tracker did not sync: %w", err)
	}
	// the claims' assume cache fills from the informer's event handlers, after the informer itself has
	// synced: wait until it holds every claim, or a busy machine sees "could not find ResourceClaim"
	claims := 0
	for _, o := range in.dra {
		if _, ok := o.(*resourceapi.ResourceClaim); ok {
			claims++
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(claimCache.List(nil)) == claims, nil
	}); err != nil {
		return nil, fmt.Errorf("the ResourceClaim assume cache did not sync: %w", err)
	}

	for _, n := range in.nodes {
		cache.AddNode(logger, n)
	}
	for _, p := range in.bound {
		in.priority(p)
		if err := cache.AddPod(logger, p); err != nil {
			return nil, err
		}
	}
	queue := append([]*v1.Pod(nil), in.pending...)
	for _, p := range queue {
		in.priority(p)
	}
	sort.SliceStable(queue, func(i, j int) bool { return *queue[i].Spec.Priority > *queue[j].Spec.Priority })

	prefer := map[string][]device{}
	if path := os.Getenv("DRA_ORACLE_PREFER"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &prefer); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	out := make([]result, 0, len(queue))
	for _, pod := range queue {
		if err := cache.UpdateSnapshot(logger, snapshot); err != nil {
			return nil, err
		}
		r := result{Pod: pod.Namespace + "/" + pod.Name}
		if msg := preEnqueue(ctx, f, pod); msg != "" {
			r.Message, r.NotEnqueued = msg, true
			out = append(out, r)
			continue
		}
		state := framework.NewCycleState()
		host, msg, failed, errs, err := scheduleOne(ctx, f, snapshot, state, pod)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", r.Pod, err)
		}
		if host == "" {
			r.Message, r.Error, r.Errors = msg, failed, errs
			out = append(out, r)
			continue
		}
		alternatives, err := sample(ctx, draManager, pod, nodeOf(in.nodes, host))
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", r.Pod, err)
		}
		state, r.Steered, err = reserve(ctx, f, draManager, snapshot, state, pod, host, prefer[r.Pod])
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", r.Pod, err)
		}
		if st := f.RunPreBindPlugins(ctx, state, pod, host); !st.IsSuccess() {
			return nil, fmt.Errorf("pod %s: prebind: %w", r.Pod, st.AsError())
		}
		r.Node = host
		devices, err := allocated(ctx, client, draManager, pod)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", r.Pod, err)
		}
		r.Devices = devices
		for _, alt := range alternatives {
			if !sameDevices(alt, devices) {
				r.Alternatives = append(r.Alternatives, alt)
			}
		}
		bound := pod.DeepCopy()
		bound.Spec.NodeName = host
		if err := cache.AddPod(logger, bound); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// reserve runs Reserve for the pod on host. With want (the devices another scheduler chose for the pod,
// DRA_ORACLE_PREFER), when the plugin's allocation takes other devices, it is undone (Unreserve) and the
// cycle run again on host (PreFilter, Filter, Reserve), up to 64 times, until the plugin takes the same
// devices: each run's pool and slice order is the real allocator's own, so any allocation found is one
// kube-scheduler makes; steering among them lets the pods after this one be compared on the same state.
func reserve(ctx context.Context, f framework.Framework, dra *dynamicresources.DefaultDRAManager, snapshot *internalcache.Snapshot,
	state *framework.CycleState, pod *v1.Pod, host string, want []device) (*framework.CycleState, bool, error) {
	before, err := dra.ResourceClaims().ListAllAllocatedDevices()
	if err != nil {
		return nil, false, err
	}
	target := sets.New[structured.DeviceID]()
	for _, d := range want {
		if id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device); !d.AdminAccess && !before.Has(id) {
			target.Insert(id)
		}
	}
	ni, err := snapshot.NodeInfos().Get(host)
	if err != nil {
		return nil, false, err
	}
	for try := 0; ; try++ {
		if st := f.RunReservePluginsReserve(ctx, state, pod, host); !st.IsSuccess() {
			return nil, false, fmt.Errorf("reserve: %w", st.AsError())
		}
		if want == nil || try == 63 {
			return state, false, nil
		}
		now, err := dra.ResourceClaims().ListAllAllocatedDevices()
		if err != nil {
			return nil, false, err
		}
		if now.Difference(before).Equal(target) {
			return state, try > 0, nil
		}
		f.RunReservePluginsUnreserve(ctx, state, pod, host)
		state = framework.NewCycleState()
		if _, st, _ := f.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
			return nil, false, fmt.Errorf("prefilter again: %w", st.AsError())
		}
		if st := f.RunFilterPlugins(ctx, state, pod, ni); !st.IsSuccess() {
			return nil, false, fmt.Errorf("filter again on %s: %w", host, st.AsError())
		}
	}
}

func nodeOf(nodes []*v1.Node, name string) *v1.Node {
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func sameDevices(a, b []device) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sample runs the structured allocator as the plugin sets it up in PreFilter (the release's feature gates,
// the devices allocated and in flight, the DeviceClasses and ResourceSlices through the DRA manager) for
// the pod's claims still to allocate, on the node it was placed on, several times: the allocator tries
// pools in Go map order and slices in the order the informer lists them, both of which change from call to
// call, so each run may find another first solution. It returns the distinct allocations, each as the
// devices of all the pod's claims (allocated ones as they are), in claim order.
func sample(ctx context.Context, dra *dynamicresources.DefaultDRAManager, pod *v1.Pod, node *v1.Node) ([][]device, error) {
	type entry struct {
		claim *resourceapi.ResourceClaim
		todo  bool
	}
	var claims []entry
	var todo []*resourceapi.ResourceClaim
	for _, name := range claimNames(pod) {
		c, err := dra.ResourceClaims().Get(pod.Namespace, name)
		if err != nil {
			return nil, err
		}
		claims = append(claims, entry{c, c.Status.Allocation == nil})
		if c.Status.Allocation == nil {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 || node == nil {
		return nil, nil
	}
	gate := feature.DefaultFeatureGate.Enabled
	fts := structured.Features{
		AdminAccess:          gate(features.DRAAdminAccess),
		PrioritizedList:      gate(features.DRAPrioritizedList),
		PartitionableDevices: gate(features.DRAPartitionableDevices),
		DeviceTaints:         gate(features.DRADeviceTaints),
		DeviceBinding:        gate(features.DRADeviceBindingConditions),
		DeviceStatus:         gate(features.DRAResourceClaimDeviceStatus),
		ConsumableCapacity:   gate(features.DRAConsumableCapacity),
	}
	var out [][]device
	start := time.Now()
	for i := 0; i < 64 && (i < 4 || time.Since(start) < 2*time.Second); i++ {
		allocated, err := dra.ResourceClaims().ListAllAllocatedDevices()
		if err != nil {
			return nil, err
		}
		state := structured.AllocatedState{AllocatedDevices: allocated, AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity: structured.NewConsumedCapacityCollection()}
		slices, err := dra.ResourceSlices().ListWithDeviceTaintRules()
		if err != nil {
			return nil, err
		}
		alloc, err := structured.NewAllocator(ctx, fts, state, dra.DeviceClasses(), slices,
			draCEL.NewCache(10, draCEL.Features{EnableConsumableCapacity: fts.ConsumableCapacity}))
		if err != nil {
			return nil, err
		}
		results, err := alloc.Allocate(ctx, node, todo)
		if err != nil || len(results) != len(todo) {
			return out, nil // the plugin's Filter passed the node; a run that does not is no outcome of it
		}
		var devs []device
		k := 0
		for _, e := range claims {
			var rs []resourceapi.DeviceRequestAllocationResult
			if e.todo {
				rs = results[k].Devices.Results
				k++
			} else {
				rs = e.claim.Status.Allocation.Devices.Results
			}
			for _, d := range rs {
				devs = append(devs, device{Claim: e.claim.Name, Request: d.Request, Driver: d.Driver, Pool: d.Pool,
					Device: d.Device, AdminAccess: d.AdminAccess != nil && *d.AdminAccess})
			}
		}
		seen := false
		for _, o := range out {
			seen = seen || sameDevices(o, devs)
		}
		if !seen {
			out = append(out, devs)
		}
	}
	return out, nil
}

// claimNames lists the names of the pod's claims in spec order (a template's claim by the pod's status).
func claimNames(pod *v1.Pod) []string {
	var out []string
	for _, pc := range pod.Spec.ResourceClaims {
		name := ""
		if pc.ResourceClaimName != nil {
			name = *pc.ResourceClaimName
		}
		for _, st := range pod.Status.ResourceClaimStatuses {
			if st.Name == pc.Name && st.ResourceClaimName != nil {
				name = *st.ResourceClaimName
			}
		}
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}

// allocated reads the pod's claims back (as PreBind wrote them) and lists their devices; it waits until
// the scheduler's claim cache holds the same, so that the next pod sees them.
func allocated(ctx context.Context, client *fake.Clientset, dra *dynamicresources.DefaultDRAManager, pod *v1.Pod) ([]device, error) {
	var out []device
	for _, pc := range pod.Spec.ResourceClaims {
		name := ""
		if pc.ResourceClaimName != nil {
			name = *pc.ResourceClaimName
		}
		for _, st := range pod.Status.ResourceClaimStatuses {
			if st.Name == pc.Name && st.ResourceClaimName != nil {
				name = *st.ResourceClaimName
			}
		}
		if name == "" {
			continue
		}
		claim, err := client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if claim.Status.Allocation == nil {
			return nil, fmt.Errorf("claim %s not allocated after PreBind", name)
		}
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			c, err := dra.ResourceClaims().Get(pod.Namespace, name)
			return err == nil && c.Status.Allocation != nil && len(c.Status.ReservedFor) == len(claim.Status.ReservedFor), nil
		}); err != nil {
			return nil, fmt.Errorf("claim %s: the claim cache did not see the allocation: %w", name, err)
		}
		for _, d := range claim.Status.Allocation.Devices.Results {
			out = append(out, device{Claim: name, Request: d.Request, Driver: d.Driver, Pool: d.Pool, Device: d.Device,
				AdminAccess: d.AdminAccess != nil && *d.AdminAccess})
		}
	}
	return out, nil
}

// preEnqueue runs the PreEnqueue plugins as the scheduling queue does before a pod may enter activeQ: the
// message of the first that rejects it, "" when none does.
func preEnqueue(ctx context.Context, f framework.Framework, pod *v1.Pod) string {
	for _, pl := range f.PreEnqueuePlugins() {
		if st := pl.PreEnqueue(ctx, pod); !st.IsSuccess() {
			return st.Message()
		}
	}
	return ""
}

// scheduleOne mirrors the scheduler's schedulePod / findNodesThatFitPod for one pod, over every node.
// It returns the node, or the FailedScheduling message (failed: the message is an error status's, and
// errs every node's distinct error).
func scheduleOne(ctx context.Context, f framework.Framework, snapshot *internalcache.Snapshot, state *framework.CycleState, pod *v1.Pod) (string, string, bool, []string, error) {
	if snapshot.NumNodes() == 0 {
		return "", "no nodes available to schedule pods", false, nil, nil
	}
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	// a FitError runs the PostFilter plugins (DynamicResources', DefaultPreemption) and the event carries
	// their message too, as schedule_one.go's ScheduleOne does
	fitError := func() string {
		_, st := f.RunPostFilterPlugins(ctx, state, pod, diagnosis.NodeToStatus)
		diagnosis.PostFilterMsg = st.Message()
		e := &framework.FitError{Pod: pod, NumAllNodes: snapshot.NumNodes(), Diagnosis: diagnosis}
		return e.Error()
	}
	allNodes, err := snapshot.NodeInfos().List()
	if err != nil {
		return "", "", false, nil, err
	}
	preRes, s, unscheduledPlugins := f.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins = unscheduledPlugins
	if !s.IsSuccess() {
		if !s.IsRejected() {
			return "", s.AsError().Error(), true, []string{s.AsError().Error()}, nil
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(s)
		diagnosis.PreFilterMsg = s.Message()
		diagnosis.AddPluginStatus(s)
		return "", fitError(), false, nil, nil
	}
	nodes := allNodes
	if !preRes.AllNodes() {
		nodes = nil
		for _, ni := range allNodes {
			if preRes.NodeNames.Has(ni.Node().Name) {
				nodes = append(nodes, ni)
			}
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(unscheduledPlugins))))
	}
	var feasible []fwk.NodeInfo
	var errs []string
	for _, ni := range nodes {
		st := f.RunFilterPlugins(ctx, state, pod, ni)
		if st.Code() == fwk.Error {
			if text := st.AsError().Error(); !slices.Contains(errs, text) {
				errs = append(errs, text)
			}
			continue
		}
		if st.IsSuccess() {
			feasible = append(feasible, ni)
		} else {
			diagnosis.NodeToStatus.Set(ni.Node().Name, st)
			diagnosis.AddPluginStatus(st)
		}
	}
	if len(errs) > 0 {
		return "", errs[0], true, errs, nil
	}
	if len(feasible) == 0 {
		return "", fitError(), false, nil, nil
	}
	if len(feasible) == 1 {
		return feasible[0].Node().Name, "", false, nil, nil
	}
	if st := f.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		return "", "", false, nil, st.AsError()
	}
	scores, st := f.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return "", "", false, nil, st.AsError()
	}
	best := scores[0]
	for _, sc := range scores[1:] {
		if sc.TotalScore > best.TotalScore || (sc.TotalScore == best.TotalScore && sc.Name < best.Name) {
			best = sc
		}
	}
	return best.Name, "", false, nil, nil
}
