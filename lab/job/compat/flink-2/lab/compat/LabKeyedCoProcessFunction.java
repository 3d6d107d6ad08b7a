package lab.compat;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;

/** Flink 2.x: RichFunction.open(OpenContext). */
public abstract class LabKeyedCoProcessFunction<K, I1, I2, O> extends KeyedCoProcessFunction<K, I1, I2, O> {
    @Override
    public final void open(OpenContext ctx) throws Exception {
        setup();
    }

    /** Called once per subtask before the first element (open). */
    protected void setup() throws Exception {}
}
