package lab.compat;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;

/** Flink 2.x: RichFunction.open(OpenContext); the subtask index comes from getTaskInfo(). */
public abstract class LabKeyedProcessFunction<K, I, O> extends KeyedProcessFunction<K, I, O> {
    @Override
    public final void open(OpenContext ctx) throws Exception {
        setup();
    }

    /** Called once per subtask before the first element (open). */
    protected void setup() throws Exception {}

    protected int subtaskIndex() {
        return getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
    }
}
