// Command scheduler-oracle places pods with the real kube-scheduler framework, in-process.
//
// It reads the same inputs `kgpu simulate` reads for a plain cluster (JSON files holding a v1 List,
// or single objects, of Nodes, Pods and PriorityClasses): pods with spec.nodeName are bound, the
// others pending. It builds the default scheduler profile from the in-tree plugin registry, puts
// nodes and bound pods into the scheduler cache, and schedules the pending pods one at a time in
// kgpu's queue order (priority descending, then input order). Each placement is added to the cache
// before the next pod, as a bind would.
//
// Determinism: every node is filtered (no percentageOfNodesToScore sampling) and score ties go to
// the node whose name sorts first, where the real scheduler picks at random among ties. Filters run
// without nominated pods, and PostFilter (preemption) does not run, so messages carry no
// "preemption:" suffix.
//
// Output: one JSON object per pending pod, one per line: {"pod":"ns/name","node":"..."} or
// {"pod":"ns/name","message":"0/3 nodes are available: ..."}. With ORACLE_DEBUG set, every node's
// plugin scores go to stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

type result struct {
	Pod     string `json:"pod"`
	Node    string `json:"node,omitempty"`
	Message string `json:"message,omitempty"`
}

type inputs struct {
	nodes     []*v1.Node
	bound     []*v1.Pod
	pending   []*v1.Pod
	classes   map[string]int32
	defaultPr int32
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: scheduler-oracle FILE.json [FILE.json...]")
		os.Exit(2)
	}
	in := &inputs{classes: map[string]int32{}}
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
	fmt.Fprintln(os.Stderr, "scheduler-oracle:", err)
	os.Exit(2)
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
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			return err
		}
		switch meta.Kind {
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
			if p.Namespace == "" {
				p.Namespace = "default"
			}
			if p.UID == "" {
				p.UID = types.UID("uid-" + p.Namespace + "-" + p.Name)
			}
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
		default:
			return fmt.Errorf("kind %q is not read by the oracle", meta.Kind)
		}
	}
	return nil
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

	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	profile := &cfg.Profiles[0]
	pct := int32(100)
	profile.PercentageOfNodesToScore = &pct

	client := fake.NewSimpleClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	cache := internalcache.New(ctx, 0, nil)
	snapshot := internalcache.NewEmptySnapshot()
	f, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithParallelism(1),
	)
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

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

	out := make([]result, 0, len(queue))
	for _, pod := range queue {
		if err := cache.UpdateSnapshot(logger, snapshot); err != nil {
			return nil, err
		}
		r := result{Pod: pod.Namespace + "/" + pod.Name}
		host, msg, err := scheduleOne(ctx, f, snapshot, pod)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", r.Pod, err)
		}
		if host == "" {
			r.Message = msg
		} else {
			r.Node = host
			bound := pod.DeepCopy()
			bound.Spec.NodeName = host
			if err := cache.AddPod(logger, bound); err != nil {
				return nil, err
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// scheduleOne mirrors the scheduler's schedulePod / findNodesThatFitPod for one pod, over every node.
func scheduleOne(ctx context.Context, f framework.Framework, snapshot *internalcache.Snapshot, pod *v1.Pod) (string, string, error) {
	if snapshot.NumNodes() == 0 {
		return "", "no nodes available to schedule pods", nil
	}
	state := framework.NewCycleState()
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	fitError := func() string {
		e := &framework.FitError{Pod: pod, NumAllNodes: snapshot.NumNodes(), Diagnosis: diagnosis}
		return e.Error()
	}
	allNodes, err := snapshot.NodeInfos().List()
	if err != nil {
		return "", "", err
	}
	preRes, s, unscheduledPlugins := f.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins = unscheduledPlugins
	if !s.IsSuccess() {
		if !s.IsRejected() {
			return "", "", s.AsError()
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(s)
		diagnosis.PreFilterMsg = s.Message()
		diagnosis.AddPluginStatus(s)
		return "", fitError(), nil
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
	for _, ni := range nodes {
		st := f.RunFilterPlugins(ctx, state, pod, ni)
		if st.Code() == fwk.Error {
			return "", "", st.AsError()
		}
		if st.IsSuccess() {
			feasible = append(feasible, ni)
		} else {
			diagnosis.NodeToStatus.Set(ni.Node().Name, st)
			diagnosis.AddPluginStatus(st)
		}
	}
	if len(feasible) == 0 {
		return "", fitError(), nil
	}
	if len(feasible) == 1 {
		return feasible[0].Node().Name, "", nil
	}
	if st := f.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		return "", "", st.AsError()
	}
	scores, st := f.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return "", "", st.AsError()
	}
	if os.Getenv("ORACLE_DEBUG") != "" {
		for _, sc := range scores {
			fmt.Fprintf(os.Stderr, "%s/%s %s total=%d %v\n", pod.Namespace, pod.Name, sc.Name, sc.TotalScore, sc.Scores)
		}
	}
	best := scores[0]
	for _, sc := range scores[1:] {
		if sc.TotalScore > best.TotalScore || (sc.TotalScore == best.TotalScore && sc.Name < best.Name) {
			best = sc
		}
	}
	return best.Name, "", nil
}
