package lab.compat;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;

/** Flink 1.x: RichFunction.open(Configuration). */
public abstract class LabKeyedCoProcessFunction<K, I1, I2, O> extends KeyedCoProcessFunction<K, I1, I2, O> {
    @Override
    public final void open(Configuration parameters) throws Exception {
        setup();
    }

    /** Called once per subtask before the first element (open). */
    protected void setup() throws Exception {}
}
