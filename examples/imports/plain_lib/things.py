class AutoThing:
    name = "plain AutoThing"
