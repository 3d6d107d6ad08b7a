package lab.compat;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;

/** Flink 1.x: RichFunction.open(Configuration); the subtask index comes from the RuntimeContext. */
public abstract class LabKeyedProcessFunction<K, I, O> extends KeyedProcessFunction<K, I, O> {
    @Override
    public final void open(Configuration parameters) throws Exception {
        setup();
    }

    /** Called once per subtask before the first element (open). */
    protected void setup() throws Exception {}

    protected int subtaskIndex() {
        return getRuntimeContext().getIndexOfThisSubtask();
    }
}
